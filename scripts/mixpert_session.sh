#!/usr/bin/env bash
# The GPU check of the MixPert kernel (issue 14), one device call (carry
# .cutlass): build; tests/test_cuda_mixpert.py in two processes (the split and the kernel
# against XLA's split, the kernel's float64 twin, the xla backend and
# float64; the fallback kernel and the XLA routes; tiny operands); the
# timeline of one int8_l4 call at 8192^3 (scripts/kernel_timeline.py);
# scripts/mixpert_probe.py (the kernel alone, the product, with the XLA
# tile-by-tile fallback instead, with XLA's split, with no fallback, on the xla backend, against
# SGEMM in the same run); scripts/fallback_probe.py (the fallback's parts);
# CUDA_INT8_TESTS=<s>: the
# int8 schemes' tests in tests/test_cuda.py, within s seconds; then, with
# NCU=1, the kernels without JAX (tests/native/kernel_check.cu --time-mixpert,
# built beside the wheel): their times, then ncu on one launch of the
# MixPert kernel and of each fallback kernel at 8192^3 (int8_l4, normal data).
# QUICK=1: after the timeline, only int8_l1/l4 and fp16x3 against SGEMM at
# 2048^3 and 8192^3 (python -m jaxemu.bench), no probes.
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"
mkdir -p "$OUT"
if [ -n "${NCU:-}" ]; then  # tests/native/kernel_check.cu, built beside the wheel
  BUILD_ONLY=1 OUT="$OUT/kernel_check" JOBS=8 JAXEMU_CUTLASS_DIR="$PWD/.cutlass" timeout 500 \
    bash scripts/sanitize_kernels.sh > /dev/null 2>&1 &
  KC_BUILD=$!
fi
STEPS=build bash scripts/gpu_session.sh > "$OUT/build_session.log" 2>&1 || { tail -30 "$OUT/build_session.log"; exit 1; }
grep "^build:" "$OUT/build_session.log"
# The file in two processes (~150 and ~240 s on an H200, stop 51; one process took over 230 s at stop 47).
export XLA_PYTHON_CLIENT_PREALLOCATE=false
JAX_PLATFORMS=cuda,cpu timeout "${TEST_TIMEOUT:-360}" python3 -m pytest -q tests/test_cuda_mixpert.py \
  -k "twin or accuracy or split_kernel" > "$OUT/test_cuda_mixpert_1.log" 2>&1 &
TESTS=$!
JAX_PLATFORMS=cuda,cpu timeout "${TEST_TIMEOUT:-360}" python3 -m pytest -q tests/test_cuda_mixpert.py \
  -k "not (twin or accuracy or split_kernel)" > "$OUT/test_cuda_mixpert_2.log" 2>&1
wait $TESTS
tail -n 15 "$OUT/test_cuda_mixpert_1.log" "$OUT/test_cuda_mixpert_2.log" | grep -E "passed|failed|error|FAIL"
# One int8_l4 call at 8192^3 kernel by kernel (normal(0,1) data): the fallback kernels, the gaps.
JAX_PLATFORMS=cuda timeout 90 python3 scripts/kernel_timeline.py --cases sq8192 --schemes int8_l4 > "$OUT/timeline.txt" 2>&1
grep -E "split_|mixpert_kernel|fallback_|Memcpy|busy" "$OUT/timeline.txt"
if [ -n "${QUICK:-}" ]; then  # (fits one 600 s call with the build: stop 48) int8 against SGEMM at 2048^3 and 8192^3
  JAX_PLATFORMS=cuda timeout 60 python3 scripts/kernel_timeline.py --cases sq2048 --schemes int8_l4 > "$OUT/timeline_2048.txt" 2>&1
  grep -E "busy" "$OUT/timeline_2048.txt"
  JAX_PLATFORMS=cuda,cpu timeout "${BENCH_TIMEOUT:-120}" python3 -m jaxemu.bench --shapes "${QUICK_SHAPES:-1x2048x2048x2048,1x8192x8192x8192}" \
    --schemes int8_l1,int8_l4,fp16x3 --backends cuda --no-baselines --reps 10 --json "$OUT/bench.json" > "$OUT/bench.txt" 2>&1
  sed -n '/^shape (B,M,K,N)/,$p' "$OUT/bench.txt"
else  # the probes
  # (--xla: the product with XLA's split and on the xla backend too, 8192^3 only: the
  # xla backend's K-tile products take seconds at K = 1M.)
  JAX_PLATFORMS=cuda,cpu timeout "${PROBE_TIMEOUT:-240}" python3 scripts/mixpert_probe.py --xla \
    --shapes 1x8192x8192x8192 --schemes "${PROBE_SCHEMES:-int8_l1,int8_l4}" 2>&1 | tee "$OUT/mixpert_probe.txt"
  JAX_PLATFORMS=cuda,cpu timeout "${PROBE_TIMEOUT:-240}" python3 scripts/mixpert_probe.py \
    --shapes "${PROBE_SHAPES:-1x1024x1048576x256,1x1048576x256x1024}" \
    --schemes "${PROBE_SCHEMES:-int8_l1,int8_l4}" 2>&1 | tee -a "$OUT/mixpert_probe.txt"
  # The fallback's parts (split, route, tile by tile and its two sides, the gathered route) on each shape.
  JAX_PLATFORMS=cuda,cpu timeout "${PROBE_TIMEOUT:-240}" python3 scripts/fallback_probe.py \
    --shapes "1x8192x8192x8192,${PROBE_SHAPES:-1x1024x1048576x256,1x1048576x256x1024}" 2>&1 \
    | grep -v Warning | tee "$OUT/fallback_probe.txt"
fi
if [ -n "${CUDA_INT8_TESTS:-}" ]; then  # the int8 schemes of tests/test_cuda.py, on the default path
  JAX_PLATFORMS=cuda,cpu timeout "${CUDA_INT8_TESTS}" python3 -m pytest -q tests/test_cuda.py -k "int8 or mixpert" 2>&1 \
    | tee "$OUT/test_cuda_int8_schemes.log" | tail -5
fi
if [ -n "${NCU:-}" ]; then
  # Without JAX: ncu segfaulted on JAX's int8_l4 product (stop 49), so the
  # kernels run from tests/native/kernel_check.cu (--time-mixpert: the split's
  # real flags, the MixPert kernel, the fallback line by line and with tiles).
  wait "$KC_BUILD" || { grep -E "error" "$OUT/kernel_check/build.log" | head -20; exit 1; }
  KC=build/kernel-check/ffi/jaxemu_kernel_check
  for spec in 1x8192x8192x8192 1x8192x8192x8192:normal 1x8192x8192x8192:2x2 1x2048x2048x2048; do
    timeout 60 "$KC" --time-mixpert "$spec"
  done | tee "$OUT/time_mixpert.txt"
  # One launch of each kernel after a warm-up (fallback_*_kernel: the line-by-line
  # mode's; the tile mode's come 11 launches later).
  for k in mixpert_kernel fallback_rows_tiles fallback_columns_tiles fallback_rows_kernel fallback_columns_kernel; do
    timeout 120 ncu --clock-control none -k "regex:$k" --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats \
      --metrics sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,dram__bytes_read.sum \
      "$KC" --time-mixpert 1x8192x8192x8192:normal > "$OUT/ncu_$k.txt" 2>&1
    echo "== $k"
    grep -E "Duration|Throughput|imma|lts__t_bytes|dram__bytes|Issue Slots|Executed Ipc|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Stall|Eligible|No Eligible" \
      "$OUT/ncu_$k.txt" | head -30
  done
fi
