#!/usr/bin/env bash
# One device call (carry .cutlass; ~6 min on a fresh machine) for where
# auto's time goes at 2048^3 when the call is bound by its launches (stop
# 60, docs/performance.md): the wheel alone (SKIP_KC=1); the host's cost per
# closed gated product and per tiny XLA op (scripts/ffi_launch_cost.py);
# JAX's profiler with the host threads (kernel_timeline.py --host) for
# fp16x3 and auto, the conditional and the choice on the device. Logs in $OUT.
#   bash scripts/host_cost_session.sh
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"; mkdir -p "$OUT"
LOG="$OUT/log.txt"
export JAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}" PYTHONUNBUFFERED=1 JAX_PLATFORMS=cuda,cpu
SKIP_KC=1 . scripts/session_build.sh
timeout 150 python3 scripts/ffi_launch_cost.py 256 2>&1 | grep -v Warn | tee -a "$LOG"
for choice in 0 1; do
  timeout 120 python3 scripts/kernel_timeline.py --cases sq2048 --schemes fp16x3,auto --calls 3 --host \
    --env JAXEMU_CUDA_DEVICE_CHOICE=$choice > "$OUT/timeline_choice$choice.txt" 2>&1
  echo "timeline, device choice $choice:" | tee -a "$LOG"
  grep -E "^== |busy|host total" "$OUT/timeline_choice$choice.txt" | head -40 | tee -a "$LOG"
done
