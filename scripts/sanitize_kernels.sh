#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, initcheck) over the CUDA kernels
# without XLA (issue 12): tests/native/kernel_check.cu runs every fused, int8,
# residue and CRT case at exact-size allocations and checks each result on the host.
# Unlike scripts/sanitize_sweep.sh (the kernels inside JAX, whose process
# crashes under the sanitizer, docs/testing.md), nothing else runs here.
#
#   scripts/sanitize_kernels.sh                        # build, then all tools
#   TOOLS=memcheck FAMILY=int8 scripts/sanitize_kernels.sh
#   OUT=dir JOBS=16 scripts/sanitize_kernels.sh
#   TOOLS=initcheck FAMILY=int8 CASES="--start 0 --count 8" scripts/sanitize_kernels.sh  # a slice of the cases
#   BUILD_ONLY=1 scripts/sanitize_kernels.sh           # build $BUILD/ffi/jaxemu_kernel_check, run nothing
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-sanitize-kernels}"
TOOLS="${TOOLS-memcheck racecheck initcheck}"  # TOOLS="" : the plain run only
SAN="${COMPUTE_SANITIZER:-compute-sanitizer}"
BUILD="${BUILD_DIR:-build/kernel-check}"
mkdir -p "$OUT"

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DJAXEMU_CUDA=ON -DJAXEMU_KERNEL_CHECK=ON \
  -DJAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}" -DPython_EXECUTABLE="$(command -v "${PYTHON:-python3}")" \
  > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 2; }
cmake --build "$BUILD" --target jaxemu_kernel_check -j "${JOBS:-16}" > "$OUT/build.log" 2>&1 \
  || { grep -E "error" "$OUT/build.log" | head -30; exit 2; }
exe="$BUILD/ffi/jaxemu_kernel_check"
[ -n "${BUILD_ONLY:-}" ] && exit 0  # (scripts/mixpert_session.sh: the executable only)
fam=()
[ -n "${FAMILY:-}" ] && fam=(--family "$FAMILY")
# shellcheck disable=SC2206
[ -n "${CASES:-}" ] && fam+=(${CASES})

# Without a sanitizer first: the results themselves.
"$exe" "${fam[@]}" > "$OUT/plain.log" 2>&1
rc=$?
echo "plain: $(tail -1 "$OUT/plain.log") (rc $rc)"
status=$(( rc != 0 ))
for tool in $TOOLS; do
  extra=()
  [ "$tool" = racecheck ] && extra=(--racecheck-report all)
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  timeout "${TOOL_TIMEOUT:-1200}" "$SAN" --tool "$tool" "${extra[@]}" --error-exitcode 3 "$exe" "${fam[@]}" > "$OUT/$tool.log" 2>&1
  rc=$?
  summary=$(grep -a -E "(ERROR|RACECHECK) SUMMARY" "$OUT/$tool.log" | tail -2 | tr "\n" " ")
  echo "$tool: rc $rc; $(grep -ac '^ok ' "$OUT/$tool.log") ok, $(grep -ac '^FAIL' "$OUT/$tool.log") FAIL; ${summary:-no summary}"
  [ "$rc" -ne 0 ] && status=1
done
exit $status
