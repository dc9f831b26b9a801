#!/bin/bash
# tf32x3 on the FP32-operand kernel (stop 61: ffi/fused/transform.cuh's
# transposing cut of B), one device call: the host layout check; kernel_check
# built in the background while the GPU tests and timings run on the carried
# module; then kernel_check's f32 family (plain) and its --time-f32.
#   PREBUILT=1 bash scripts/tf32_f32_session.sh
#   (run(carry=[".cutlass", "jaxemu/_jaxemu_cuda.cpython-312-x86_64-linux-gnu.so"]);
#    the module from scripts/build_device_extension.sh)
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"
LOG="$OUT/session.txt"
mkdir -p "$OUT"
export JAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}" JAX_PLATFORMS=cuda,cpu PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
ls jaxemu/_jaxemu_cuda.cpython-3*.so > /dev/null || { echo "carry the module (scripts/build_device_extension.sh)"; exit 1; }
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -Iffi -I"$JAXEMU_CUTLASS_DIR/include" \
  tests/native/f32_layout_check.cu -o /tmp/f32_layout_check && /tmp/f32_layout_check | grep -c ": ok" \
  | sed 's/^/layout check ok lines: /' | tee -a "$LOG"
nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -Iffi -I"$JAXEMU_CUTLASS_DIR/include" \
  tests/native/tf32_round_check.cu -o /tmp/tf32_round_check && /tmp/tf32_round_check | tee -a "$LOG"
(BUILD_ONLY=1 OUT="$OUT/kc" JOBS=12 bash scripts/sanitize_kernels.sh > /dev/null 2>&1; echo "kc rc=$?" > "$OUT/kc_rc") &
kc=$!
timeout "${TEST_TIMEOUT:-240}" python3 -m pytest -q -rf -p no:cacheprovider tests/test_cuda_f32.py -k "${TESTS:-tf32}" \
  > "$OUT/pytest.txt" 2>&1
grep -a "^FAILED\|passed\|failed" "$OUT/pytest.txt" | tail -12 | tee -a "$LOG"
echo "tests: $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
timeout "${AB_TIMEOUT:-150}" python3 scripts/f32_ab.py --hang-s 100 --schemes "${AB_SCHEMES:-tf32x3}" \
  --shapes "${AB_SHAPES:-1x1024x1048576x256,1x2048x2048x2048,1x4096x4096x4096}" 2>&1 | tee "$OUT/f32_ab.txt" \
  | tail -8 | tee -a "$LOG"
wait $kc
echo "kernel_check build: $(( $(date +%s) - t0 )) s; $(cat "$OUT/kc_rc")" | tee -a "$LOG"
exe=build/kernel-check/ffi/jaxemu_kernel_check
if [ -x "$exe" ]; then
  timeout "${KC_TIMEOUT:-300}" "$exe" --family f32 > "$OUT/f32_family.log" 2>&1
  echo "kernel_check f32: rc $?; $(grep -ac '^ok ' "$OUT/f32_family.log") ok, $(grep -ac '^FAIL' "$OUT/f32_family.log") FAIL" \
    | tee -a "$LOG"
  grep -a "^FAIL" "$OUT/f32_family.log" | head -5 | tee -a "$LOG"
  for s in 1x1024x1048576x256 1x2048x2048x2048; do
    timeout 60 "$exe" --time-f32 $s 2>&1 | grep -a "tf32\|bf16x6" | tee -a "$LOG"
  done
else
  grep -a error "$OUT/kc/build.log" | head | tee -a "$LOG"
fi
echo "total: $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
