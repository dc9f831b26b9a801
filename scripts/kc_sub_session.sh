#!/bin/bash
# hi*hi promoted every half K-tile (stop 63: ffi/fused/params.h:
# Problem::kc_sub), device calls on a warm machine:
#   STEP=check bash scripts/kc_sub_session.sh   # build both (or PREBUILT=1), kernel_check's fused family, GPU tests
#   STEP=ab bash scripts/kc_sub_session.sh      # scripts/kc_ab.py: each scheme against its kc variant
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"
LOG="$OUT/session.txt"
mkdir -p "$OUT"
export JAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}" JAX_PLATFORMS=cuda,cpu PYTHONUNBUFFERED=1
t0=$(date +%s)
if [ "${STEP:-check}" = check ]; then
  source scripts/session_build.sh
  exe=build/kernel-check/ffi/jaxemu_kernel_check
  timeout "${KC_TIMEOUT:-240}" "$exe" --family fused > "$OUT/fused_family.log" 2>&1
  echo "kernel_check fused: rc $?; $(grep -ac '^ok ' "$OUT/fused_family.log") ok ($(grep -a '^ok ' "$OUT/fused_family.log" | grep -c kc_sub=2) with kc_sub=2), $(grep -ac '^FAIL' "$OUT/fused_family.log") FAIL" | tee -a "$LOG"
  grep -a "^FAIL" "$OUT/fused_family.log" | head -5 | tee -a "$LOG"
  timeout "${TEST_TIMEOUT:-200}" python3 -m pytest -q -rf -p no:cacheprovider tests/test_cuda.py \
    -k "${TESTS:-test_auto_hybrid_and_cost_model_on_the_gpu}" > "$OUT/pytest.txt" 2>&1
  grep -a "^FAILED\|passed\|failed" "$OUT/pytest.txt" | tail -6 | tee -a "$LOG"
else
  [ -n "${PREBUILT:-}" ] && export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  timeout "${AB_TIMEOUT:-540}" python3 scripts/kc_ab.py ${AB_ARGS:-} > "$OUT/kc_ab.txt" 2>&1
  echo "kc_ab rc $?" | tee -a "$LOG"
  grep -a "SGEMM  worst" "$OUT/kc_ab.txt" | tee -a "$LOG"
fi
echo "total: $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
