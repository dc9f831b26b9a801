#!/usr/bin/env bash
# compute-sanitizer over the cuda backend's fused kernels (issue 12, GPU part):
# memcheck, racecheck and initcheck, each over the shapes part of
# scripts/sanitize_sweep.py (split into SHARDS runs of ~3 min), then the
# randomized property part (cuda vs xla vs float64) once without a sanitizer.
#
#   scripts/sanitize_sweep.sh                  # everything (needs a GPU and the CUDA extension)
#   TOOLS=memcheck SHARDS=4 scripts/sanitize_sweep.sh
#   DRY_RUN=1 scripts/sanitize_sweep.sh        # print the commands and case counts only
#
# Status: not yet run on a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python}"
TOOLS="${TOOLS:-memcheck racecheck initcheck}"
SHARDS="${SHARDS:-3}"
OUT="${OUT:-sanitize-$(date +%Y%m%d-%H%M%S)}"
SAN="${COMPUTE_SANITIZER:-compute-sanitizer}"

# No preallocation: JAX's arena grows as the cases need, so accesses past the
# arena's end are out of any allocation. (The "platform" allocator, one
# cudaMalloc per buffer, would expose smaller overruns too, but with jax 0.11
# under compute-sanitizer it segfaults the process after a few cases; measured
# on an H200 and known upstream: jax-ml/jax#18663. Set SANITIZE_ALLOCATOR=platform
# to try it.)
if [ -n "${SANITIZE_ALLOCATOR:-}" ]; then export XLA_PYTHON_CLIENT_ALLOCATOR="$SANITIZE_ALLOCATOR"; fi
export XLA_PYTHON_CLIENT_PREALLOCATE=false
# No autotuning: fewer foreign kernel launches under the sanitizer.
export XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_autotune_level=0"

run() {
  echo "+ $*"
  if [ -z "${DRY_RUN:-}" ]; then "$@"; fi
}

if [ -n "${DRY_RUN:-}" ]; then
  JAX_PLATFORMS=cpu "$PY" scripts/sanitize_sweep.py --dry-run | tail -2
else
  mkdir -p "$OUT"
  command -v "$SAN" >/dev/null || { echo "compute-sanitizer not found (set COMPUTE_SANITIZER)" >&2; exit 2; }
fi

status=0
for tool in $TOOLS; do
  extra=()
  case "$tool" in
    memcheck) extra=(--leak-check full) ;;
    racecheck) extra=(--racecheck-report all) ;;
    initcheck) extra=() ;;
    *) echo "unknown tool $tool" >&2; exit 2 ;;
  esac
  for ((i = 0; i < SHARDS; i++)); do
    log="$OUT/$tool-$i.log"
    if [ -n "${DRY_RUN:-}" ]; then
      run "$SAN" --tool "$tool" "${extra[@]}" --error-exitcode 3 \
        "$PY" scripts/sanitize_sweep.py --part shapes --shard "$i/$SHARDS"
    elif ! "$SAN" --tool "$tool" "${extra[@]}" --error-exitcode 3 \
        "$PY" scripts/sanitize_sweep.py --part shapes --shard "$i/$SHARDS" >"$log" 2>&1; then
      echo "$tool shard $i/$SHARDS: FAILED (see $log)"; status=1
    else
      echo "$tool shard $i/$SHARDS: ok ($(grep -c '^ok' "$log") cases; $log)"
    fi
  done
done

# The randomized property part: no sanitizer (it compares numerics).
if [ -n "${DRY_RUN:-}" ]; then
  run "$PY" scripts/sanitize_sweep.py --part random
elif ! "$PY" scripts/sanitize_sweep.py --part random >"$OUT/random.log" 2>&1; then
  echo "random part: FAILED (see $OUT/random.log)"; status=1
else
  echo "random part: ok ($(tail -2 "$OUT/random.log" | head -1))"
fi
exit $status
