#!/bin/bash
# Stop 63's device calls on carried modules (scripts/build_device_extension.sh):
#   STEP=bench: the suite on the short-K shapes (the half-K-tile rule: kernel_kc)
#     and this tree against the one before it (alt_old/: its jaxemu/ with its
#     module, a git worktree copy) at 8192^3 and 2048^3, alternating processes.
#   STEP=ab: scripts/kc_ab.py, each scheme against its kc variant (AB_ARGS);
#     calls 1-2 ran it, and a build with kernel_check's fused family, as
#     scripts/kc_sub_session.sh (folded in here).
#   STEP=tests: kernel_check (built here), its f32 and fused families,
#     tf32_round_check, and the GPU tests of tf32x3 and the short-K rule
#     (TESTS: pytest -k of tests/test_cuda_f32.py; CUDA_TESTS: of tests/test_cuda.py).
# run(carry=["jaxemu/_jaxemu_cuda.cpython-312-x86_64-linux-gnu.so",
#            "alt_old/jaxemu/_jaxemu_cuda.cpython-312-x86_64-linux-gnu.so"]) (+ ".cutlass" for STEP=tests)
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"
LOG="$OUT/session.txt"
mkdir -p "$OUT"
export JAX_PLATFORMS=cuda,cpu PYTHONUNBUFFERED=1 JAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
if [ "${STEP:-bench}" = ab ]; then
  PYTHONPATH=$PWD timeout "${AB_TIMEOUT:-540}" python3 scripts/kc_ab.py ${AB_ARGS:-} > "$OUT/kc_ab.txt" 2>&1
  echo "kc_ab rc $?" | tee -a "$LOG"
  grep -a "SGEMM  worst" "$OUT/kc_ab.txt" | tee -a "$LOG"
elif [ "${STEP:-bench}" = bench ]; then
  for r in 1 2; do
    for v in old new; do
      dir=$PWD; [ $v = old ] && dir=$PWD/alt_old
      (cd /tmp && PYTHONPATH=$dir timeout 200 python3 -m jaxemu.bench --shapes 1x8192x8192x8192,1x2048x2048x2048 \
        --schemes "${AB_SCHEMES:-bf16x6,fp16x3,tf32x3,bf16x3}" --backends cuda --no-baselines --reps 7 --json "/tmp/ab_${v}_$r.json" \
        > "$OUT/ab_${v}_$r.txt" 2>&1)
      rc=$?
      echo "$v $r: rc $rc, $(grep -a -c TFLOP "$OUT/ab_${v}_$r.txt") timed" | tee -a "$LOG"
    done
  done
  PYTHONPATH=$PWD timeout "${SUITE_TIMEOUT:-330}" python3 -m jaxemu.bench --suite shapes \
    --shapes "${SUITE_SHAPES:-1x1048576x256x1024,1x8192x128x262144,1x1024x1048576x256}" \
    --schemes "${SUITE_SCHEMES:-bf16x3,bf16x6,bf16x9,tf32x3,fp16x3,fp16x3_bitcut,auto}" --json "$OUT/suite_short.json" \
    > "$OUT/suite_short.txt" 2>&1
  echo "suite rc $?" | tee -a "$LOG"
  tail -8 "$OUT/suite_short.txt" | tee -a "$LOG"
else
  (BUILD_ONLY=1 OUT="$OUT/kc" JOBS=14 bash scripts/sanitize_kernels.sh > /dev/null 2>&1; echo "kc rc=$?" > "$OUT/kc_rc") &
  kc=$!
  nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -Iffi -I"$JAXEMU_CUTLASS_DIR/include" \
    tests/native/tf32_round_check.cu -o /tmp/tf32_round_check && /tmp/tf32_round_check | tee -a "$LOG"
  echo "tf32_round_check rc ${PIPESTATUS[0]}" | tee -a "$LOG"
  PYTHONPATH=$PWD timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q -rf -p no:cacheprovider tests/test_cuda_f32.py \
    -k "${TESTS:-tf32}" > "$OUT/pytest.txt" 2>&1
  grep -a "^FAILED\|passed\|failed" "$OUT/pytest.txt" | tail -8 | tee -a "$LOG"
  PYTHONPATH=$PWD timeout 200 python3 -m pytest -q -rf -p no:cacheprovider tests/test_cuda.py \
    -k "${CUDA_TESTS:-short_k_promotes}" > "$OUT/pytest_cuda.txt" 2>&1
  grep -a "^FAILED\|passed\|failed" "$OUT/pytest_cuda.txt" | tail -8 | tee -a "$LOG"
  wait $kc
  echo "kernel_check build: $(( $(date +%s) - t0 )) s; $(cat "$OUT/kc_rc")" | tee -a "$LOG"
  exe=build/kernel-check/ffi/jaxemu_kernel_check
  for fam in f32 fused; do
    timeout 200 "$exe" --family $fam > "$OUT/${fam}_family.log" 2>&1
    rc=$?
    echo "kernel_check $fam: rc $rc; $(grep -ac '^ok ' "$OUT/${fam}_family.log") ok, $(grep -ac '^FAIL' "$OUT/${fam}_family.log") FAIL" | tee -a "$LOG"
    grep -a "^FAIL" "$OUT/${fam}_family.log" | head -5 | tee -a "$LOG"
  done
fi
echo "total: $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
