#!/usr/bin/env bash
# Per-kernel times (ncu) of emulated products on the issue-10 shapes: which
# fusions and kernels run, and what each costs (the product runs twice: the
# list holds both calls). On the GPU machine, $OUT set; builds first:
#   CASES="1x1048576x256x1024:fp16x3 1x8192x8192x8192:bf16x6" bash scripts/profile_fused.sh
set -o pipefail; export PYTHONUNBUFFERED=1
STEPS=build bash scripts/gpu_session.sh > $OUT/session.log 2>&1 || { tail -30 $OUT/session.log; exit 1; }
export JAX_PLATFORMS=cuda,cpu XLA_FLAGS="--xla_gpu_autotune_level=0"  # no autotuning kernels in the list
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
mkdir -p $OUT/hlo
for c in ${CASES:-1x1048576x256x1024:fp16x3 1x1024x1048576x256:fp16x3 1x8192x128x262144:fp16x3 1x8192x8192x8192:fp16x3}; do
  shape=${c%%:*}; scheme=${c##*:}
  HLO_OUT=$OUT/hlo/${shape}_$scheme.txt timeout 200 ncu --clock-control none --csv --print-units base --metrics $M \
    python3 scripts/fused_profile.py $shape $scheme > /tmp/ncu.csv 2>/tmp/ncu.err || tail -5 /tmp/ncu.err
  echo "== $shape $scheme"
  python3 - /tmp/ncu.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
by = collections.OrderedDict()
for r in rows:
    by.setdefault((r["ID"], r["Kernel Name"][:70]), {})[r["Metric Name"]] = r["Metric Value"]
for (i, name), d in by.items():
    t = float(d.get("gpu__time_duration.sum", "0").replace(",", "")) / 1e6
    print(f"{t:8.3f} ms dram {d.get('dram__throughput.avg.pct_of_peak_sustained_elapsed', '-'):>6}% "
          f"tc {d.get('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active', '-'):>6}%  {name}")
PY
done 2>&1 | tee $OUT/profile.txt
