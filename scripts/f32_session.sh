#!/bin/bash
# The FP32-operand kernels on the GPU (docs/performance.md, stops 32-33):
# built and checked (kernel_check --family f32: both forms, A's slices in
# shared memory and in registers), the GPU tests (tests/test_cuda_f32.py),
# then timed against the slice path (scripts/f32_ab.py, and kernel_check
# --time-f32 for the two forms alone); with SANITIZE=1 also memcheck and
# racecheck on a slice of the kernel_check cases. Two device calls on one
# machine (each under 10 minutes; the second right after the first, while
# the machine is warm and the build is there):
#   PART=1 bash scripts/f32_session.sh    (carry .cutlass): build, kernel_check
#   PART=2 bash scripts/f32_session.sh    tests, timings
#   AB_ARGS="--shapes 1x4096x4096x4096" AB_TIMEOUT=300 PART=2 bash scripts/f32_session.sh
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"
export JAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}" JAX_PLATFORMS=cuda,cpu PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
if [ "${PART:-1}" = 1 ]; then
  # The register-A fragments' pairing, on the host (tests/native/f32_layout_check.cu)
  nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -Iffi -I"$JAXEMU_CUTLASS_DIR/include" \
    tests/native/f32_layout_check.cu -o /tmp/f32_layout_check && /tmp/f32_layout_check | tr '\n' ' '; echo
  python3 -m pip install --no-build-isolation --no-deps -Cbuild-dir=build/gpu -Cbuild.verbose=false \
    -Ccmake.define.JAXEMU_CUDA=ON -e . > "$OUT/build.log" 2>&1 &
  bp=$!
  (FAMILY=f32 TOOLS="" OUT="$OUT/kernels" JOBS=8 timeout 500 bash scripts/sanitize_kernels.sh 2>&1 | tail -3)
  wait $bp || { tail -40 "$OUT/build.log"; exit 1; }
  echo "builds + kernel_check: $(( $(date +%s) - t0 )) s"
  grep -a "^FAIL" "$OUT/kernels/plain.log" | head -5
  if [ "${SANITIZE:-0}" = 1 ]; then
    FAMILY=f32 TOOLS="memcheck racecheck" CASES="--start 0 --count 12" OUT="$OUT/sanitize" TOOL_TIMEOUT=150 \
      timeout 320 bash scripts/sanitize_kernels.sh 2>&1 | tail -3
  fi
else
  for s in 1x1024x1048576x256 1x8192x8192x8192 1x1048576x256x1024 1x2048x2048x2048; do
    timeout 60 build/kernel-check/ffi/jaxemu_kernel_check --time-f32 $s 2>&1 | tail -2
  done
  timeout 240 python3 -m pytest -q -rf -p no:cacheprovider tests/test_cuda_f32.py > "$OUT/pytest.txt" 2>&1
  grep -a "^FAILED\|passed\|failed" "$OUT/pytest.txt" | tail -12
  # shellcheck disable=SC2086
  timeout "${AB_TIMEOUT:-240}" python3 scripts/f32_ab.py --hang-s 100 ${AB_ARGS:-} 2>&1 | tee "$OUT/f32_ab.txt"
fi
echo "total: $(( $(date +%s) - t0 )) s"
