#!/usr/bin/env bash
# One device call (carry .cutlass; ~8 min on a fresh H200): the MixPert fallback
# kernel's K-tile by K-tile path ($JAXEMU_CUDA_MIXPERT_FALLBACK_TILES, issue 14).
# Build; its GPU tests (the tile path against the line-by-line path, bit for
# bit, and float64); the timeline of one int8_l4 call at 8192^3 with it
# (the fallback kernels' times); int8_l4 / int8_l1 against SGEMM at 2048^3 and
# 8192^3, without and with it (python -m jaxemu.bench, one process each).
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"
mkdir -p "$OUT"
STEPS=build bash scripts/gpu_session.sh > "$OUT/build_session.log" 2>&1 || { tail -30 "$OUT/build_session.log"; exit 1; }
grep "^build:" "$OUT/build_session.log"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
JAX_PLATFORMS=cuda,cpu timeout 200 python3 -m pytest -q tests/test_cuda_mixpert.py \
  -k "fallback_tiles or fallback_kernel_is or scattered_fallback" > "$OUT/tests.log" 2>&1
tail -n 3 "$OUT/tests.log"
grep -E "^(FAILED|ERROR)|Error" "$OUT/tests.log" | head -10
JAXEMU_CUDA_MIXPERT_FALLBACK_TILES=1 JAX_PLATFORMS=cuda timeout 90 python3 scripts/kernel_timeline.py \
  --cases sq8192 --schemes int8_l4 > "$OUT/timeline_tiles.txt" 2>&1
grep -E "split_|mixpert_kernel|fallback_|busy" "$OUT/timeline_tiles.txt"
for tiles in 0 1; do
  JAXEMU_CUDA_MIXPERT_FALLBACK_TILES=$tiles JAX_PLATFORMS=cuda,cpu timeout 120 python3 -m jaxemu.bench \
    --shapes 1x2048x2048x2048,1x8192x8192x8192 --schemes int8_l1,int8_l4 --backends cuda --no-baselines --reps 10 \
    > "$OUT/bench_tiles$tiles.txt" 2>&1
  echo "tiles=$tiles"; sed -n '/^shape (B,M,K,N)/,$p' "$OUT/bench_tiles$tiles.txt"
done
