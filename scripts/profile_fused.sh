#!/usr/bin/env bash
# Per-kernel times (ncu) of emulated products on the issue-10 shapes: which
# fusions and kernels run, and what each costs (the product runs twice: the
# list holds both calls). Then, for the GEMM kernel alone (one launch), where
# its time goes: DRAM bytes, L2 hit rate, tensor pipe, occupancy. On the GPU
# machine, $OUT set; builds first (SKIP_BUILD=1: already built):
#   CASES="1x1048576x256x1024:fp16x3 1x8192x8192x8192:bf16x6" bash scripts/profile_fused.sh
# The FP32-operand kernel (fused_f32_kernel) everywhere, its shared-memory
# pipe and stalls in the detail lines (DETAIL=1):
#   JAXEMU_CUDA_F32_OPERANDS=1 DETAIL=1 CASES="1x8192x8192x8192:bf16x3" bash scripts/profile_fused.sh
set -o pipefail; export PYTHONUNBUFFERED=1
[ -n "${SKIP_BUILD:-}" ] || STEPS=build bash scripts/gpu_session.sh > $OUT/session.log 2>&1 || { tail -30 $OUT/session.log; exit 1; }
export JAX_PLATFORMS=cuda,cpu XLA_FLAGS="--xla_gpu_autotune_level=0"  # no autotuning kernels in the list
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
D=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_bytes.sum,\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,\
launch__grid_size,launch__registers_per_thread,smsp__warp_issue_stalled_barrier_per_warp_active.pct,\
smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct,\
smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,\
l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum
mkdir -p $OUT/hlo
table() {  # ncu's csv -> one line per kernel launch
  python3 - "$1" "$2" <<'PY'
import csv, sys, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
by = collections.OrderedDict()
for r in rows:
    by.setdefault((r["ID"], r["Kernel Name"][:60]), {})[r["Metric Name"]] = r["Metric Value"]
def num(d, k):
    try:
        return float(d.get(k, "0").replace(",", ""))
    except ValueError:  # "n/a"
        return float("nan")
for (i, name), d in by.items():
    t = num(d, "gpu__time_duration.sum") / 1e6
    if sys.argv[2] == "short":
        print(f"{t:8.3f} ms dram {d.get('dram__throughput.avg.pct_of_peak_sustained_elapsed', '-'):>6}% "
              f"tc {d.get('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active', '-'):>6}%  {name}")
    else:
        print(f"{t:8.3f} ms  DRAM read {num(d, 'dram__bytes_read.sum') / 2**30:.2f} GiB write "
              f"{num(d, 'dram__bytes_write.sum') / 2**30:.2f} GiB  L2 {num(d, 'lts__t_bytes.sum') / 2**30:.1f} GiB "
              f"hit {num(d, 'lts__t_sector_hit_rate.pct'):.0f}%  tc {num(d, 'sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'):.0f}%  "
              f"SMs busy {num(d, 'sm__cycles_active.avg.pct_of_peak_sustained_elapsed'):.0f}%  grid {d.get('launch__grid_size')} "
              f"regs {d.get('launch__registers_per_thread')}  stalls: barrier {num(d, 'smsp__warp_issue_stalled_barrier_per_warp_active.pct'):.0f}% "
              f"long-sb {num(d, 'smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct'):.0f}% "
              f"wait {num(d, 'smsp__warp_issue_stalled_wait_per_warp_active.pct'):.0f}% "
              f"mio {num(d, 'smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct'):.0f}% "
              f"short-sb {num(d, 'smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct'):.0f}%  "
              f"smem wavefronts {num(d, 'l1tex__data_pipe_lsu_wavefronts_mem_shared.sum') / 1e9:.2f} G "
              f"(conflicts {num(d, 'l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum') / 1e9:.2f} G)  "
              f"instructions {num(d, 'smsp__inst_executed.sum') / 1e9:.2f} G  {name}")
PY
}
for c in ${CASES:-1x1048576x256x1024:fp16x3 1x1024x1048576x256:fp16x3 1x8192x128x262144:fp16x3 1x8192x8192x8192:fp16x3}; do
  shape=${c%%:*}; scheme=${c##*:}
  echo "== $shape $scheme"
  HLO_OUT=$OUT/hlo/${shape}_$scheme.txt timeout "${NCU_TIMEOUT:-200}" ncu --clock-control none --csv --print-units base --metrics $M \
    python3 scripts/fused_profile.py $shape $scheme > /tmp/ncu.csv 2>/tmp/ncu.err || tail -5 /tmp/ncu.err
  table /tmp/ncu.csv short
  if [ -n "${DETAIL:-}" ]; then
    timeout "${NCU_TIMEOUT:-200}" ncu --clock-control none --csv --print-units base -k "regex:${KERNEL_RE:-fused_gemm|fused_f32}" --launch-count 1 \
      --metrics $D python3 scripts/fused_profile.py $shape $scheme > /tmp/ncu_d.csv 2>/tmp/ncu.err || tail -5 /tmp/ncu.err
    table /tmp/ncu_d.csv detail
  fi
done 2>&1 | tee $OUT/profile.txt
