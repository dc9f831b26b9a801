#!/usr/bin/env bash
# One device call (carry .cutlass), no JAX: tests/native/kernel_check.cu's
# --time-mixpert on the tree's kernels, then on each overlay directory in
# $ALTS (files copied over the tree's, rebuilt incrementally, the tree's
# restored after), then ncu on one launch of the MixPert kernel of each
# (int8_l4, 8192^3, normal data). MEMCHECK_SPEC=BxMxKxN: compute-sanitizer
# memcheck on the tree's kernels at that shape first; MEMCHECK_F32_SPEC=
# BxMxKxN[:law]: the same on --time-f32's (e.g. 2x300x1032x200:sparse: edge
# tiles, a batch, K-splits, scales chosen late). NCU_SKIP: MixPert
# launches skipped before the profiled one (default 1: the by-shape kernel;
# 12: the two-consumer-warpgroup one, 23: three; kernel_check runs each 11
# times in that order). F32_SPEC="BxMxKxN ...": --time-f32 there on the
# tree and on each overlay (bf16x3, bf16x6 and fp16x3 on the FP32-operand
# kernel, with C's hashes), and ncu of fp16x3's kernel at the first shape
# (its second launch: the 46th of fused_f32_kernel) on the tree; NCU_F32_SKIP=56:
# the second launch of fp16x3 with its exponents found in the kernel instead
# ("45 56": both, one ncu run each).
# ALT_SPECS: the MixPert shapes for the overlays (default SPECS; "" for
# none). NCU_MIXPERT=0: no ncu of the MixPert kernels at the end.
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"; mkdir -p "$OUT"
LOG="$OUT/log.txt"
KC=build/kernel-check/ffi/jaxemu_kernel_check
SPECS="${SPECS:-1x8192x8192x8192 1x8192x8192x8192:normal 1x8192x8192x8192:2x2 1x2048x2048x2048 1x8192x128x262144:normal}"
t0=$(date +%s)
BUILD_ONLY=1 OUT="$OUT/kc" JOBS=16 JAXEMU_CUTLASS_DIR="$PWD/.cutlass" bash scripts/sanitize_kernels.sh > /dev/null 2>&1 \
  || { grep error "$OUT/kc/build.log" | head; exit 1; }
echo "build tree: $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
for s in $SPECS; do timeout 60 "$KC" --time-mixpert "$s"; done 2>&1 | sed 's/^/tree: /' | tee -a "$LOG"
cp "$KC" /tmp/kc_tree
if [ -n "${MEMCHECK_SPEC:-}" ]; then  # compute-sanitizer memcheck on the tree's kernels, one shape
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/kc_tree --time-mixpert "$MEMCHECK_SPEC" 2>&1 \
    | tail -3 | sed 's/^/memcheck: /' | tee -a "$LOG"
fi
time_f32() {  # $1: the binary, $2: the log's prefix; the SM clock and power sampled meanwhile (every 20 ms)
  local clocks="$OUT/clocks_${2//[^A-Za-z0-9]/_}.csv"
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 20 > "$clocks" 2>/dev/null &
  local sampler=$!
  for s in ${F32_SPEC:-}; do timeout 120 "$1" --time-f32 "$s"; done 2>&1 | sed "s|^|$2: |" | tee -a "$LOG"
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  # (busy samples only: those above 500 MHz)
  awk -F', *' '$1 > 500 {n++; c+=$1; p+=$2; if (!lo || $1 < lo) lo=$1; if ($1 > hi) hi=$1}
    END {if (n) printf "%s: SM clock %d..%d MHz (mean %.0f), power %.0f W mean, over %d busy samples\n", pre, lo, hi, c/n, p/n, n}' \
    pre="$2" "$clocks" | tee -a "$LOG"
}
if [ -n "${MEMCHECK_F32_SPEC:-}" ]; then  # compute-sanitizer memcheck on every FP32-operand configuration --time-f32 runs
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/kc_tree --time-f32 "$MEMCHECK_F32_SPEC" 2>&1 \
    | tail -4 | sed 's/^/memcheck f32: /' | tee -a "$LOG"
fi
if [ -n "${F32_SPEC:-}" ]; then  # the FP32-operand kernel (issue 10's k-means update, dense)
  time_f32 /tmp/kc_tree "tree f32"
  for skip in ${NCU_F32_SKIP:-45}; do
    timeout 180 ncu --clock-control none -k regex:fused_f32_kernel --launch-skip "$skip" --launch-count 1 --set full \
      --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum \
      /tmp/kc_tree --time-f32 "${F32_SPEC%% *}" > "$OUT/ncu_f32_fp16x3_$skip.txt" 2>&1
    grep -E "Duration|SM Frequency|Issue Slots Busy|Executed Ipc A|Executed Instructions  |hmma|DRAM Throughput|dram__bytes|Registers Per|Achieved Occupancy|Local Memory|Warp Cycles Per Issued|stalled" \
      "$OUT/ncu_f32_fp16x3_$skip.txt" | cut -c1-300 | sed "s/^/f32 ncu (launch $skip): /" >> "$LOG"
  done
fi
mkdir -p /tmp/orig
for alt in ${ALTS:-}; do
  files=$(cd "$alt" && find . -type f)
  for f in $files; do mkdir -p "/tmp/orig/$(dirname "$f")"; cp "$f" "/tmp/orig/$f"; cp "$alt/$f" "$f"; done
  t0=$(date +%s)
  cmake --build build/kernel-check --target jaxemu_kernel_check -j 16 > "$OUT/kc/build_${alt//\//_}.log" 2>&1 \
    || { grep error "$OUT/kc/build_${alt//\//_}.log" | head; exit 1; }
  echo "build $alt: $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
  cp "$KC" "/tmp/kc_${alt//\//_}"
  for s in ${ALT_SPECS-$SPECS}; do timeout 60 "$KC" --time-mixpert "$s"; done 2>&1 | sed "s|^|$alt: |" | tee -a "$LOG"
  time_f32 "$KC" "$alt f32"
  for f in $files; do cp "/tmp/orig/$f" "$f"; done
done
[ -n "${ALTS:-}" ] && time_f32 /tmp/kc_tree "tree f32 (again, after the overlays)"
[ "${NCU_MIXPERT:-1}" = 0 ] && exit 0
for s in 1x8192x8192x8192 1x8192x8192x8192:2x2; do timeout 60 /tmp/kc_tree --time-mixpert "$s"; done 2>&1 | sed 's/^/tree: /' | tee -a "$LOG"
for b in /tmp/kc_*; do
  echo "== $b: $(cuobjdump -sass "$b" 2>/dev/null | grep -cE 'I2F') I2F in SASS" >> "$LOG"
  timeout 120 ncu --clock-control none -k regex:mixpert_kernel --launch-skip "${NCU_SKIP:-1}" --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section WarpStateStats \
    --metrics sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active \
    "$b" --time-mixpert 1x8192x8192x8192:normal > "$OUT/ncu_$(basename "$b").txt" 2>&1
  grep -E "Duration|Issue Slots Busy|Executed Ipc A|pipe_|imma|Warp Cycles Per Issued|Executed Instructions  " "$OUT/ncu_$(basename "$b").txt" >> "$LOG"
done
