#!/usr/bin/env bash
# One device call (carry .cutlass; ~8 min on a fresh machine) for where
# auto's time goes at 2048^3 when the call is bound by its launches (stop
# 60, docs/performance.md): the wheel alone (SKIP_KC=1); the host's cost per
# closed gated product and per tiny XLA op (scripts/ffi_launch_cost.py);
# JAX's profiler with the host threads (kernel_timeline.py --host) for
# fp16x3 and auto, the conditional and the choice on the device, XLA's command
# buffers on and off; auto_without_cond.py with them on and off. Logs in $OUT.
#   bash scripts/host_cost_session.sh   (PREBUILT=1: the module carried, scripts/build_device_extension.sh)
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"; mkdir -p "$OUT"
LOG="$OUT/log.txt"
export JAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}" PYTHONUNBUFFERED=1 JAX_PLATFORMS=cuda,cpu
SKIP_KC=1 . scripts/session_build.sh  # (PREBUILT=1: the carried module, no build)
timeout 100 python3 scripts/ffi_launch_cost.py 256 2>&1 | grep -v Warn | tee -a "$LOG"
# XLA's command buffers (CUDA graphs of its fusions) on and off: a graph
# whose buffers moved since its last launch is updated on the host first.
for run in "0 on" "1 on" "0 off"; do
  set -- $run
  flags=""; [ "$2" = off ] && flags="--xla_gpu_enable_command_buffer="
  XLA_FLAGS="$flags" timeout 120 python3 scripts/kernel_timeline.py --cases sq2048 --schemes fp16x3,auto --calls 3 \
    --host --env JAXEMU_CUDA_DEVICE_CHOICE=$1 > "$OUT/timeline_choice$1_cmdbuf_$2.txt" 2>&1
  echo "timeline, device choice $1, command buffers $2:" | tee -a "$LOG"
  grep -E "^== |busy|host total" "$OUT/timeline_choice$1_cmdbuf_$2.txt" | head -36 | tee -a "$LOG"
done
for flags in "" "--xla_gpu_enable_command_buffer="; do
  echo "auto_without_cond.py, XLA_FLAGS='$flags':" | tee -a "$LOG"
  XLA_FLAGS="$flags" timeout 100 python3 scripts/auto_without_cond.py 1x2048x2048x2048 1x2048x2048x2048 2>&1 \
    | grep -v Warn | tee -a "$LOG"
done
