#!/usr/bin/env bash
# One device call (carry .cutlass), no JAX: the split and the row statistics
# kernel of this tree against a base's (an overlay of its files), same
# machine, timed in alternating order (the clock falls under sustained load:
# docs/performance.md, stop 55), then one ncu launch of each form.
#   mkdir -p alt/base && git archive main ffi/fused/split.cuh ffi/fused_dispatch.cu \
#     ffi/stats | tar -x -C alt/base
#   BASE_DIR=alt/base bash scripts/split_lean_session.sh
# SHAPES: kernel_check --time-split's BxRxK (default: the k-means
# distances' A, kNN's, 8192^3's); NCU=0: no ncu. The tree's split family
# runs plain and under memcheck first.
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"; mkdir -p "$OUT"
LOG="$OUT/log.txt"
KC=build/kernel-check/ffi/jaxemu_kernel_check
SHAPES="${SHAPES:-1x1048576x256 1x262144x128 1x8192x8192}"
export JAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}"
build() {
  BUILD_ONLY=1 OUT="$OUT/kc" JOBS=16 bash scripts/sanitize_kernels.sh > /dev/null 2>&1 \
    || { grep error "$OUT/kc/build.log" | head; exit 1; }
}
t0=$(date +%s)
build && cp "$KC" /tmp/kc_tree
echo "build tree: $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
TOOLS=memcheck FAMILY=split OUT="$OUT/kc" timeout 400 bash scripts/sanitize_kernels.sh 2>&1 | sed 's/^/tree: /' | tee -a "$LOG"
bins=(/tmp/kc_tree)
if [ -n "${BASE_DIR:-}" ]; then  # the base's files over the tree's, rebuilt, then the tree's restored
  files=$(cd "$BASE_DIR" && find . -type f | sed 's|^\./||')
  for f in $files; do cp "$f" "/tmp/tree_$(echo "$f" | tr / _)"; cp "$BASE_DIR/$f" "$f"; done
  t0=$(date +%s)
  build && cp "$KC" /tmp/kc_base && bins+=(/tmp/kc_base)
  echo "build base: $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
  for f in $files; do cp "/tmp/tree_$(echo "$f" | tr / _)" "$f"; done
fi
for round in 1 2; do  # tree, base, then base, tree
  order=("${bins[@]}"); [ "$round" = 2 ] && order=($(printf '%s\n' "${bins[@]}" | tac))
  for s in $SHAPES; do
    for b in "${order[@]}"; do timeout 60 "$b" --time-split "$s" 2>&1 | sed "s|^|${b#/tmp/kc_} r$round: |"; done
  done
done | tee -a "$LOG"
if [ "${NCU:-1}" != 0 ]; then
  s="${SHAPES%% *}"
  for b in "${bins[@]}"; do
    for k in "split_rows_exp_kernel" "row_stats_warp_kernel"; do
      timeout 120 ncu --kernel-name-base demangled --kernel-name regex:"$k" --launch-count 1 \
        --section SpeedOfLight --section InstructionStats "$b" --time-split "$s" > "$OUT/ncu_${b#/tmp/kc_}_$k.txt" 2>&1
      echo "${b#/tmp/kc_} $k: $(grep -E 'Duration|DRAM Throughput|Compute \(SM\) Throughput|Executed Instructions  ' \
        "$OUT/ncu_${b#/tmp/kc_}_$k.txt" | awk '{print $1, $2, $NF}' | tr '\n' ' ')"
    done
  done | tee -a "$LOG"
fi
