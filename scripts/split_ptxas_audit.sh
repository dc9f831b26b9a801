#!/usr/bin/env bash
# Registers and stack frames (ptxas -v, sm_90a) of the split kernels (the 24
# that find fp16's row exponents, ffi/fused_dispatch.cu: split_rows_exp_kernel,
# split_rows_exp_block_kernel; and the rows and transposed splits), without a GPU and
# without the GEMM configurations: a reduced copy of the file up to the
# launchers, the kernels instantiated explicitly. ~5 min on 2 cores.
#   bash scripts/split_ptxas_audit.sh [source file, default ffi/fused_dispatch.cu]
set -euo pipefail
SRC="${1:-ffi/fused_dispatch.cu}"
TMP=$(mktemp -d); TU=ffi/_split_audit_$$.cu
trap 'rm -rf "$TMP" "$TU"' EXIT
n=$(grep -n "^template <int kStats>$" "$SRC" | tail -1 | cut -d: -f1)
head -n $((n - 1)) "$SRC" | grep -v -e "configs.inc" -e "f32_special.cuh" -e "JAXEMU_FUSED_CONFIGS(JAXEMU_FUSED_DECLARE)" > "$TU"
for S in 0 1 2; do
  for LT in "8, 1" "16, 1" "32, 1" "32, 2" "32, 4" "32, 8"; do
    echo "template __global__ void split_rows_exp_kernel<$LT, $S>(const SplitProblem, const Gate);" >> "$TU"
  done
  for T in 2 4; do echo "template __global__ void split_rows_exp_block_kernel<$T, $S>(const SplitProblem, const Gate);" >> "$TU"; done
done
echo "}}" >> "$TU"
nvcc -std=c++17 --expt-relaxed-constexpr -O3 -arch=sm_90a -Xptxas -v -Iffi -I"${JAXEMU_CUTLASS_DIR:-.cutlass}/include" \
  -cubin -o "$TMP/split.cubin" "$TU" > "$TMP/ptxas.log" 2>&1 || { cat "$TMP/ptxas.log"; exit 1; }
python3 - "$TMP/ptxas.log" <<'PY'
import re, sys
name = frame = None
for line in open(sys.argv[1]):
    m = re.search(r"Compiling entry function '(\S+)'", line)
    if m:
        k = re.search(r"split_rows_exp_(block_)?kernelILi(\d+)ELi(\d+)E(?:Li(\d+)E)?", m.group(1))
        other = re.search(r"(split_\w+_kernel)", m.group(1))
        name = (("block" if k.group(1) else "warp") + "<" + ",".join(x for x in k.groups()[1:] if x) + ">" if k
                else other.group(1) if other else m.group(1)[:40])
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", line)
    if m: frame = m.groups()
    m = re.search(r"Used (\d+) registers", line)
    if m and name:
        print(f"{name:14s} registers {m.group(1):>4s}  stack {frame[0]:>4s} B  spill stores {frame[1]:>3s} B")
        name = None
PY
