#!/usr/bin/env bash
# The GPU check of the MixPert kernel (issue 14), one device call (carry
# .cutlass): build; tests/test_cuda_mixpert.py (the kernel against its
# float64 twin, the xla backend and float64; the gathered fallback; tiny
# operands); scripts/mixpert_probe.py (the kernel alone, the product, the
# product with no fallback, against SGEMM in the same run); then, with
# NCU=1, ncu's tensor-pipe use, DRAM throughput and stall reasons of the
# kernel at 8192^3 (int8_l4).
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"
mkdir -p "$OUT"
STEPS=build bash scripts/gpu_session.sh > "$OUT/build_session.log" 2>&1 || { tail -30 "$OUT/build_session.log"; exit 1; }
grep "^build:" "$OUT/build_session.log"
JAX_PLATFORMS=cuda,cpu timeout "${TEST_TIMEOUT:-240}" python3 -m pytest -q tests/test_cuda_mixpert.py 2>&1 \
  | tee "$OUT/test_cuda_mixpert.log" | tail -15
JAX_PLATFORMS=cuda,cpu timeout "${PROBE_TIMEOUT:-240}" python3 scripts/mixpert_probe.py \
  --shapes "${PROBE_SHAPES:-1x8192x8192x8192,1x4096x4096x4096,1x1024x1048576x256,1x1048576x256x1024}" \
  --schemes "${PROBE_SCHEMES:-int8_l1,int8_l4}" 2>&1 | tee "$OUT/mixpert_probe.txt"
if [ -n "${NCU:-}" ]; then
  JAXEMU_CUDA_MIXPERT=1 JAX_PLATFORMS=cuda,cpu timeout 200 ncu --clock-control none --kernel-name regex:mixpert_kernel \
    --launch-count 1 --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,\
sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_wait_per_warp_active.pct,\
smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct,\
smsp__issue_active.avg.pct_of_peak_sustained_active \
    python3 scripts/mixpert_probe.py --shapes 1x8192x8192x8192 --schemes int8_l4 > "$OUT/ncu_mixpert.txt" 2>&1
  grep -E "mixpert_kernel|gpu__time|dram__|tensor_op|pipe_alu|pipe_fma|stalled|issue_active" "$OUT/ncu_mixpert.txt" | head -20
fi
