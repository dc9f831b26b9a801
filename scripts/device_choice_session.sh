#!/usr/bin/env bash
# One device call (carry .cutlass) for auto's choice on the device (docs/
# auto.md, "The choice on the device"; written in stop 59, run in stop 60 on a
# H200): kernel_check and the wheel built side by side; kernel_check's fused,
# split and fp32 families plain and under memcheck (every fused and split
# case also behind a closed and an open gate); the GPU tests of the gates
# and of auto; then auto with the choice on the device against fp16x3 and
# today's auto (scripts/auto_without_cond.py), and the fused GEMM's speed
# with the gate's argument (jaxemu.bench, fp16x3 against SGEMM: compare
# with docs/performance.md, stop 59). A short table last; logs in $OUT.
#   bash scripts/device_choice_session.sh
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"; mkdir -p "$OUT"
LOG="$OUT/log.txt"
KC=build/kernel-check/ffi/jaxemu_kernel_check
export JAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}" PYTHONUNBUFFERED=1 JAX_PLATFORMS=cuda,cpu
. scripts/session_build.sh  # (SKIP_KC=1: the wheel alone)
for fam in fp32 split fused; do
  timeout 300 "$KC" --family $fam > "$OUT/kc_$fam.log" 2>&1; echo "$fam family rc=$?: $(tail -1 "$OUT/kc_$fam.log")" | tee -a "$LOG"
  grep "^FAIL" "$OUT/kc_$fam.log" | head -3 | cut -c1-300 | tee -a "$LOG"
done
if [ -n "${MEMCHECK-1}" ]; then  # (MEMCHECK= : none)
  for fam in fp32 split; do
    TOOLS=memcheck FAMILY=$fam OUT="$OUT/kc" timeout 200 bash scripts/sanitize_kernels.sh 2>&1 | tail -1 | tee -a "$LOG"
  done
fi
timeout 400 python3 -m pytest -q -x tests/test_cuda.py -k "test_gated_split or test_auto_chooses_on_the_device" > "$OUT/tests.log" 2>&1
echo "tests rc=$?: $(tail -1 "$OUT/tests.log")" | tee -a "$LOG"
timeout 200 python3 scripts/auto_without_cond.py 1x2048x2048x2048 8x2048x2048x2048 1x4096x4096x4096 1x2048x2048x2048 \
  2>&1 | grep -v Warn | tee -a "$LOG"
timeout 200 python3 -m jaxemu.bench --shapes 1x8192x8192x8192,1x32768x1024x4096,1x1048576x256x1024 --schemes fp16x3 \
  --backends cuda --reps 5 --no-baselines --error-laws= 2>&1 | grep -E "^1x" | tee -a "$LOG"
