#!/usr/bin/env bash
# One GPU session: build the CUDA extension, run the GPU tests, run the benchmark.
# Used through the device tool (see BUILD.md): logs and results go to $OUT.
#   STEPS="build test bench" BENCH_ARGS="..." bash scripts/gpu_session.sh
#   STEPS=apps bash scripts/gpu_session.sh     # the applications (python -m jaxemu.apps)
#   STEPS="build int8" bash scripts/gpu_session.sh   # the int8 kernels' tests and benchmark (issue 14)
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"
mkdir -p "$OUT"
STEPS="${STEPS:-build test bench}"
export PYTHONUNBUFFERED=1
# CUTLASS headers travel in .cutlass/ (the GPU machine has no network).
export JAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
python3 -c "import jax; print('jax', jax.__version__, jax.devices())" | tee -a "$OUT/gpu.txt"

if [[ " $STEPS " == *" build "* ]]; then
  t0=$(date +%s)
  python3 -m pip install --no-build-isolation --no-deps -Cbuild-dir=build/gpu -Cbuild.verbose=false \
    -Ccmake.define.JAXEMU_CUDA=ON -e . > "$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s"
  python3 -m jaxemu info | tee "$OUT/info.txt"
fi
if [[ " $STEPS " == *" test "* ]]; then
  JAX_PLATFORMS=cuda,cpu timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q tests/test_cuda.py ${TEST_ARGS:-} \
    2>&1 | tee "$OUT/test_cuda.log" | tail -25
fi
if [[ " $STEPS " == *" bench "* ]]; then
  JAX_PLATFORMS=cuda,cpu timeout "${BENCH_TIMEOUT:-300}" python3 -m jaxemu.bench --json "$OUT/bench.json" \
    --plot "$OUT/pareto.png" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | tail -60
fi
if [[ " $STEPS " == *" int8 "* ]]; then
  # The int8 kernels: exactness tests, then the rates and ozaki2_f32 vs SGEMM.
  JAX_PLATFORMS=cuda,cpu timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q tests/test_cuda_int8.py \
    2>&1 | tee "$OUT/test_cuda_int8.log" | tail -25
  JAX_PLATFORMS=cuda,cpu timeout "${BENCH_TIMEOUT:-300}" python3 scripts/int8_bench.py \
    --json "$OUT/int8_bench.json" ${INT8_ARGS:-} 2>&1 | tee "$OUT/int8_bench.log" | tail -30
fi
if [[ " $STEPS " == *" apps "* ]]; then
  JAX_PLATFORMS=cuda,cpu timeout "${APPS_TIMEOUT:-450}" python3 -m jaxemu.apps --json "$OUT/apps.json" \
    --md "$OUT/apps.md" --plot "$OUT/apps.png" ${APPS_ARGS:-} 2>&1 | tee "$OUT/apps.log" | tail -40
fi
