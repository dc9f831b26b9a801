#!/usr/bin/env bash
# One device call (carry .cutlass) for the branches next/split-stats-lean
# and next/split-extremes: the split's statistics form on top of the lean
# split and statistics (stop 57), with the probe on A's side or (the
# extremes alone in A's split, a row of A probing B: next/split-extremes,
# where A has >= auto.PROBE_B_RATIO times B's columns) on B's.
# kernel_check and the wheel built side by side; the split family plain
# (MEMCHECK=1: also under memcheck); --time-split (the split, its
# statistics form, the statistics kernel alone) over K; then either the
# bench (auto and fp16x3: JAXEMU_CUDA_SPLIT_STATS off, on with the probe
# on A, on with the probe where auto puts it, off again; the default) or,
# TIMELINE=1, the distances' GPU timeline of auto in those modes
# (scripts/kernel_timeline.py: where the stats form's time goes outside
# its kernel; stop 57 found ~0.2 ms). MODES picks the modes (also
# "default": the switch unset); SKIP_KC=1 builds the wheel alone; TESTS=1
# runs tests/test_cuda.py -k "$TESTS_K" first.
#   bash scripts/split_stats_session.sh
#   TIMELINE=1 MEMCHECK=1 bash scripts/split_stats_session.sh
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"; mkdir -p "$OUT"
LOG="$OUT/log.txt"
KC=build/kernel-check/ffi/jaxemu_kernel_check
export JAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}" PYTHONUNBUFFERED=1
. scripts/session_build.sh  # (SKIP_KC=1: the wheel alone)
if [ -z "${SKIP_KC:-}" ]; then
  timeout 200 "$KC" --family split > "$OUT/split_family.log" 2>&1; echo "split family rc=$?: $(tail -1 "$OUT/split_family.log")" | tee -a "$LOG"
  grep "^FAIL" "$OUT/split_family.log" | head -5 | cut -c1-300 | tee -a "$LOG"
  if [ -n "${MEMCHECK:-}" ]; then
    TOOLS=memcheck FAMILY=split OUT="$OUT/kc" timeout 300 bash scripts/sanitize_kernels.sh 2>&1 | tail -2 | tee -a "$LOG"
  fi
  for s in ${SHAPES:-1x1048576x256 1x262144x128 1x262144x512 1x131072x1024 1x65536x2048 1x8192x8192}; do
    timeout 60 "$KC" --time-split "$s" 2>&1
  done | tee -a "$LOG"
fi
# Modes: off; on with the probe on A's side (auto.PROBE_B_RATIO out of
# reach); on as auto chooses (the probe on B's side at the distances).
# default: the switch unset (the extremes alone, where the probe runs over B's side).
run_mode() {  # mode, a script path or a module name, its arguments
  local mode=$1 on=1 ratio=""; shift
  [ "$mode" = off ] && on=0
  [ "$mode" = default ] && on=
  [ "$mode" = probe_a ] && ratio="A.PROBE_B_RATIO = 1 << 40; "
  env ${on:+JAXEMU_CUDA_SPLIT_STATS=$on} JAX_PLATFORMS=cuda,cpu timeout 150 python3 -c "import runpy, sys
import jaxemu.auto as A
${ratio}target, sys.argv = sys.argv[1], sys.argv[1:]
(runpy.run_path if target.endswith('.py') else runpy.run_module)(target, run_name='__main__')" "$@"
}
if [ -n "${TESTS:-}" ]; then  # the GPU tests of the split, the statistics and auto, the switch unset
  JAX_PLATFORMS=cuda,cpu timeout 400 python3 -m pytest -q -x tests/test_cuda.py -k "${TESTS_K:-split or stats or auto or fp16x3}" \
    > "$OUT/tests.log" 2>&1; echo "tests rc=$?: $(tail -1 "$OUT/tests.log")" | tee -a "$LOG"
fi
if [ -n "${TIMELINE:-}" ]; then
  for mode in ${MODES:-off probe_a auto}; do
    echo "### timeline, $mode" | tee -a "$LOG"
    run_mode $mode scripts/kernel_timeline.py --cases distances --schemes fp16x3,auto --summary 2>&1 | tail -40 | tee -a "$LOG"
  done
  exit 0
fi
ARGS="--shapes ${BENCH_SHAPES:-1x1048576x256x1024,1x8192x128x262144,1x2048x2048x2048,1x8192x8192x8192} --schemes fp16x3,auto --backends cuda --reps 5 --no-baselines --error-laws="
for mode in ${MODES:-off probe_a auto off}; do
  echo "### $mode" | tee -a "$LOG"
  run_mode $mode jaxemu.bench --json "$OUT/bench_$mode.json" $ARGS 2>&1 | grep -E "^1x" | tee -a "$LOG"
done
