#!/usr/bin/env bash
# The GPU check of fp16x3 on the FP32-operand kernel (issue 10: the k-means
# update on dense operands), one device call (carry .cutlass): build; the
# FP32-operand kernels' GPU tests (bf16 and fp16x3); the A/B of the slice
# path against the kernel (scripts/f32_ab.py) on the update, 2048^3 and
# 8192^3; the k-means update as k-means writes it (exact one-hot), with the
# kernel forced and without.
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"
mkdir -p "$OUT"
STEPS=build bash scripts/gpu_session.sh 2>&1 | tail -1 | cut -c1-60
JAX_PLATFORMS=cuda,cpu timeout "${TEST_TIMEOUT:-240}" python3 -m pytest -q -x tests/test_cuda_f32.py 2>&1 \
  | tee "$OUT/test_cuda_f32.log" | tail -15
JAX_PLATFORMS=cuda timeout 150 python3 scripts/f32_ab.py --schemes fp16x3,bf16x6 --reps 5 \
  --shapes "${AB_SHAPES:-1x1024x1048576x256,1x2048x2048x2048,1x8192x8192x8192}" 2>&1 | tee "$OUT/f32_ab.txt"
for f in 0 1; do
  JAXEMU_CUDA_F32_OPERANDS=$f JAX_PLATFORMS=cuda timeout 60 python3 scripts/onehot_bench.py --schemes fp16x3,bf16x6 \
    2>&1 | sed "s/^/operands=$f /" | tee -a "$OUT/onehot.txt"
done
