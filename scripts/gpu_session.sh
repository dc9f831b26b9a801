#!/usr/bin/env bash
# One GPU session: build the CUDA extension, run the GPU tests, run the benchmark.
# Used through the device tool (see BUILD.md): logs and results go to $OUT.
#   STEPS="build test bench" BENCH_ARGS="..." bash scripts/gpu_session.sh
#   STEPS=apps bash scripts/gpu_session.sh     # the applications (python -m jaxemu.apps)
#   STEPS="build int8" bash scripts/gpu_session.sh   # the int8 kernels' tests and benchmark (issue 14)
#   STEPS="build split" bash scripts/gpu_session.sh  # the split kernel: tests, XLA's split vs the kernel (issue 10)
#   STEPS="build kernels" bash scripts/gpu_session.sh  # tests/native/kernel_check without a sanitizer (every family)
#   STEPS="build costs" bash scripts/gpu_session.sh  # auto's cost-model points (scripts/cost_points.py), to ship in costs.py
#   STEPS="build paths" bash scripts/gpu_session.sh  # the one-hot update on both bf16 paths, and where kNN's time goes
#   STEPS="baseline" BASE_DIR=.base BENCH_ARGS="..." bash scripts/gpu_session.sh  # another version's bench, same machine
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"
mkdir -p "$OUT"
STEPS="${STEPS:-build test bench}"
export PYTHONUNBUFFERED=1
# CUTLASS headers travel in .cutlass/ (the GPU machine has no network).
export JAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
python3 -c "import jax; print('jax', jax.__version__, jax.devices())" | tee -a "$OUT/gpu.txt"

if [[ " $STEPS " == *" baseline "* ]]; then
  # Another version of the package (BASE_DIR: a `git archive` of it, carried
  # beside the tree), built into its own site directory and benchmarked with
  # the same BENCH_ARGS on the same machine, before this tree's editable
  # install (whose import hook would shadow it): same-machine A/B figures.
  t0=$(date +%s)
  python3 -m pip install --no-build-isolation --no-deps --target /tmp/base_site -Cbuild-dir=/tmp/base_build \
    -Ccmake.define.JAXEMU_CUDA=ON "${BASE_DIR:?BASE_DIR: the baseline tree}" > "$OUT/base_build.log" 2>&1 \
    || { tail -40 "$OUT/base_build.log"; exit 1; }
  echo "baseline build: $(( $(date +%s) - t0 )) s"
  (cd /tmp && PYTHONPATH=/tmp/base_site JAX_PLATFORMS=cuda,cpu timeout "${BENCH_TIMEOUT:-300}" python3 -m jaxemu.bench \
    --json "$OUT/base_bench.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/base_bench.log" | tail -30)
fi
if [[ " $STEPS " == *" build "* ]]; then
  t0=$(date +%s)
  python3 -m pip install --no-build-isolation --no-deps -Cbuild-dir=build/gpu -Cbuild.verbose=false \
    -Ccmake.define.JAXEMU_CUDA=ON ${BUILD_ARGS:-} -e . > "$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
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
  # The int8 kernels: exactness tests (residue kernel and float64 CRT on, the
  # defaults), then the rates and ozaki2_f32 vs SGEMM.
  JAX_PLATFORMS=cuda,cpu timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q tests/test_cuda_int8.py \
    2>&1 | tee "$OUT/test_cuda_int8.log" | tail -25
  JAX_PLATFORMS=cuda,cpu timeout "${BENCH_TIMEOUT:-300}" python3 scripts/int8_bench.py \
    --json "$OUT/int8_bench.json" ${INT8_ARGS:-} 2>&1 | tee "$OUT/int8_bench.log" | tail -30
fi
if [[ " $STEPS " == *" split "* ]]; then
  # The split kernel (jaxemu/backends/switches.py): the GPU tests (its
  # bit-for-bit test against XLA's split among them), then the application
  # shapes with XLA's split (JAXEMU_CUDA_SPLIT=0) and with the kernel.
  JAX_PLATFORMS=cuda,cpu timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q tests/test_cuda.py \
    2>&1 | tee "$OUT/test_split.log" | tail -15
  for sp in 0 1; do
    JAXEMU_CUDA_SPLIT=$sp JAX_PLATFORMS=cuda,cpu timeout "${BENCH_TIMEOUT:-300}" python3 -m jaxemu.bench \
      --shapes "${SPLIT_SHAPES:-1x1048576x256x1024,1x1024x1048576x256,1x8192x128x262144,1x8192x8192x8192}" \
      --schemes "${SPLIT_SCHEMES:-fp16x3,bf16x6}" --backends cuda --reps 5 --json "$OUT/split$sp.json" \
      2>&1 | tee "$OUT/bench_split$sp.log" | tail -12
  done
fi
if [[ " $STEPS " == *" kernels "* ]]; then
  # Every kernel family through its host interface, results checked on the host.
  TOOLS="" OUT="$OUT/kernels" timeout "${KERNELS_TIMEOUT:-400}" bash scripts/sanitize_kernels.sh 2>&1 | tail -5
fi
if [[ " $STEPS " == *" costs "* ]]; then
  JAX_PLATFORMS=cuda,cpu timeout "${COSTS_TIMEOUT:-300}" python3 scripts/cost_points.py --repeats "${COSTS_REPEATS:-5}" \
    2>&1 | tee "$OUT/cost_points.txt" | tail -8
fi
if [[ " $STEPS " == *" paths "* ]]; then
  # The k-means update with its exact one-hot on the slice path (the default)
  # and on the FP32-operand kernel (JAXEMU_CUDA_F32_OPERANDS=1), then
  # scripts/knn_probe.py (the search's GEMMs, top_k, and the database-block scan).
  for f32 in default 1; do
    echo "== one-hot update, JAXEMU_CUDA_F32_OPERANDS=$f32"
    ( [ "$f32" = default ] || export JAXEMU_CUDA_F32_OPERANDS=$f32
      JAX_PLATFORMS=cuda,cpu timeout "${PATHS_TIMEOUT:-150}" python3 scripts/onehot_bench.py 2>&1 \
        | tee "$OUT/onehot_f32_$f32.log" | tail -8 )
  done
  PYTHONPATH=. JAX_PLATFORMS=cuda,cpu timeout "${PATHS_TIMEOUT:-150}" python3 scripts/knn_probe.py 2>&1 \
    | tee "$OUT/knn_probe.log" | tail -6
fi
if [[ " $STEPS " == *" apps "* ]]; then
  # The commit in the runner's output comes from .git, which may be stale on
  # a copied tree: give JAXEMU_COMMIT in the command (BUILD.md).
  [ -n "${JAXEMU_COMMIT:-}" ] || echo "note: JAXEMU_COMMIT unset; the commit the apps report comes from .git"
  JAX_PLATFORMS=cuda,cpu timeout "${APPS_TIMEOUT:-450}" python3 -m jaxemu.apps --json "$OUT/apps.json" \
    --md "$OUT/apps.md" --plot "$OUT/apps.png" ${APPS_ARGS:-} 2>&1 | tee "$OUT/apps.log" | tail -40
fi
