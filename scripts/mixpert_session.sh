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
# NCU=1, ncu's tensor-pipe use, DRAM throughput and stall reasons of the
# kernel at 8192^3 (int8_l4). QUICK=1: after the timeline, only int8_l1/l4 and
# fp16x3 against SGEMM at 2048^3 and 8192^3 (python -m jaxemu.bench), no probes
# (QUICK=1 NCU=1: then ncu, the fallback kernels included).
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"
mkdir -p "$OUT"
STEPS=build bash scripts/gpu_session.sh > "$OUT/build_session.log" 2>&1 || { tail -30 "$OUT/build_session.log"; exit 1; }
grep "^build:" "$OUT/build_session.log"
# The file in two processes (~140 s each on an H200, stop 47; one process took over 230 s).
export XLA_PYTHON_CLIENT_PREALLOCATE=false
JAX_PLATFORMS=cuda,cpu timeout "${TEST_TIMEOUT:-240}" python3 -m pytest -q tests/test_cuda_mixpert.py \
  -k "twin or accuracy or split_kernel" > "$OUT/test_cuda_mixpert_1.log" 2>&1 &
TESTS=$!
JAX_PLATFORMS=cuda,cpu timeout "${TEST_TIMEOUT:-240}" python3 -m pytest -q tests/test_cuda_mixpert.py \
  -k "not (twin or accuracy or split_kernel)" > "$OUT/test_cuda_mixpert_2.log" 2>&1
wait $TESTS
tail -n 15 "$OUT/test_cuda_mixpert_1.log" "$OUT/test_cuda_mixpert_2.log" | grep -E "passed|failed|error|FAIL"
# One int8_l4 call at 8192^3 kernel by kernel (normal(0,1) data): the fallback kernels, the gaps.
JAX_PLATFORMS=cuda timeout 90 python3 scripts/kernel_timeline.py --cases sq8192 --schemes int8_l4 > "$OUT/timeline.txt" 2>&1
grep -E "split_|mixpert_kernel|fallback_|Memcpy|busy" "$OUT/timeline.txt"
if [ -n "${QUICK:-}" ]; then  # (fits one 600 s call with the build: stop 48) int8 against SGEMM at 2048^3 and 8192^3
  JAX_PLATFORMS=cuda timeout 60 python3 scripts/kernel_timeline.py --cases sq2048 --schemes int8_l4 > "$OUT/timeline_2048.txt" 2>&1
  grep -E "busy" "$OUT/timeline_2048.txt"
  JAX_PLATFORMS=cuda,cpu timeout 120 python3 -m jaxemu.bench --shapes 1x2048x2048x2048,1x8192x8192x8192 \
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
  # (No autotuning and no command buffers under ncu: with them the process segfaulted, stop 49.)
  XLA_FLAGS="--xla_gpu_autotune_level=0 --xla_gpu_enable_command_buffer=" \
  XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_PLATFORMS=cuda,cpu timeout 200 ncu --clock-control none --kernel-name "regex:mixpert_kernel|split_rows|split_columns|fallback_" \
    --launch-count 5 --metrics gpu__time_duration.sum,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,\
sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_wait_per_warp_active.pct,\
smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct,\
smsp__issue_active.avg.pct_of_peak_sustained_active \
    python3 -c "import jax, jaxemu; from jaxemu import testing as T
a, b = (jax.device_put(v) for v in T.operands('normal(0,1)', 8192, 8192, 8192, 0))
jax.jit(jaxemu.emulate(lambda a, b: a @ b, scheme='int8_l4'))(a, b).block_until_ready()" > "$OUT/ncu_mixpert.txt" 2>&1
  grep -E "mixpert_kernel|split_rows|split_columns|fallback_|lts__|gpu__time|dram__|tensor_op|pipe_alu|pipe_fma|stalled|issue_active" "$OUT/ncu_mixpert.txt" | head -60
fi
