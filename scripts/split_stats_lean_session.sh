#!/usr/bin/env bash
# One device call (carry .cutlass) for the branch next/split-stats-lean: the
# split's statistics form on top of the lean split and statistics (stop 57).
# kernel_check and the wheel built side by side; the split family plain
# (MEMCHECK=1: also under memcheck); --time-split (the split, its
# statistics form, the statistics kernel alone) over K; then either the
# bench (auto and fp16x3 with JAXEMU_CUDA_SPLIT_STATS off, on, off; the
# default) or, TIMELINE=1, the distances' GPU timeline of auto with the
# switch off and on (scripts/kernel_timeline.py: where the stats form's
# time goes outside its kernel; stop 57 found ~0.2 ms).
#   bash scripts/split_stats_lean_session.sh
#   TIMELINE=1 MEMCHECK=1 bash scripts/split_stats_lean_session.sh
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"; mkdir -p "$OUT"
LOG="$OUT/log.txt"
KC=build/kernel-check/ffi/jaxemu_kernel_check
export JAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}" PYTHONUNBUFFERED=1
t0=$(date +%s)
(BUILD_ONLY=1 OUT="$OUT/kc" JOBS=12 bash scripts/sanitize_kernels.sh > /dev/null 2>&1; echo "kc rc=$?" > "$OUT/kc_rc") &
python3 -m pip install --no-build-isolation --no-deps -Cbuild-dir=build/gpu -Cbuild.verbose=false \
  -Ccmake.define.JAXEMU_CUDA=ON -e . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
wait
echo "builds: $(( $(date +%s) - t0 )) s; $(cat "$OUT/kc_rc")" | tee -a "$LOG"
grep -q "rc=0" "$OUT/kc_rc" || { grep error "$OUT/kc/build.log" | head; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
timeout 200 "$KC" --family split > "$OUT/split_family.log" 2>&1; echo "split family rc=$?: $(tail -1 "$OUT/split_family.log")" | tee -a "$LOG"
grep "^FAIL" "$OUT/split_family.log" | head -5 | cut -c1-300 | tee -a "$LOG"
if [ -n "${MEMCHECK:-}" ]; then
  TOOLS=memcheck FAMILY=split OUT="$OUT/kc" timeout 300 bash scripts/sanitize_kernels.sh 2>&1 | tail -2 | tee -a "$LOG"
fi
for s in ${SHAPES:-1x1048576x256 1x262144x128 1x262144x512 1x131072x1024 1x65536x2048 1x8192x8192}; do
  timeout 60 "$KC" --time-split "$s" 2>&1
done | tee -a "$LOG"
if [ -n "${TIMELINE:-}" ]; then
  for on in 0 1; do
    echo "### timeline, JAXEMU_CUDA_SPLIT_STATS=$on" | tee -a "$LOG"
    JAX_PLATFORMS=cuda,cpu timeout 150 python3 scripts/kernel_timeline.py --cases distances --schemes fp16x3,auto \
      --env JAXEMU_CUDA_SPLIT_STATS=$on --summary 2>&1 | tail -40 | tee -a "$LOG"
  done
  exit 0
fi
ARGS="--shapes ${BENCH_SHAPES:-1x1048576x256x1024,1x8192x128x262144,1x2048x2048x2048,1x8192x8192x8192} --schemes fp16x3,auto --backends cuda --reps 5 --no-baselines --error-laws="
for on in 0 1 0; do
  echo "### JAXEMU_CUDA_SPLIT_STATS=$on" | tee -a "$LOG"
  JAXEMU_CUDA_SPLIT_STATS=$on JAX_PLATFORMS=cuda,cpu timeout 150 python3 -m jaxemu.bench --json "$OUT/bench_$on.json" $ARGS 2>&1 \
    | grep -E "^1x" | tee -a "$LOG"
done
