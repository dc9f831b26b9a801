#!/usr/bin/env bash
# Where auto's time goes on the k-means centre update (issue 11/13), with and
# without the row-statistics kernel (JAXEMU_CUDA_ROW_STATS): ncu per kernel
# of one call of jax.jit(jaxemu.emulate(update, "auto")) and of fp16x3.
#   bash scripts/profile_auto_update.sh        (after STEPS=build scripts/gpu_session.sh)
set -uo pipefail
OUT="${OUT:-/tmp/jaxemu-out}"; mkdir -p "$OUT"
cat > /tmp/auto_update_once.py <<'PY'
import sys, jax, jax.numpy as jnp, numpy as np, jaxemu
n, d, k = 1 << 20, 256, 1024
rng = np.random.default_rng(0)
x = jax.device_put(rng.normal(size=(n, d)).astype(np.float32))
lab = jax.device_put(rng.integers(0, k, size=n).astype(np.int32))
f = jax.jit(jaxemu.emulate(lambda x, lab: jax.nn.one_hot(lab, k, dtype=x.dtype).T @ x, scheme=sys.argv[1]))
for _ in range(3): f(x, lab).block_until_ready()
jax.effects_barrier()
f(x, lab).block_until_ready()
PY
for cfg in "fp16x3 1" "auto 0" "auto 1"; do
  set -- $cfg
  echo "== $1, JAXEMU_CUDA_ROW_STATS=$2"
  JAXEMU_CUDA_ROW_STATS=$2 JAX_PLATFORMS=cuda timeout 300 ncu --metrics gpu__time_duration.sum,dram__bytes.sum --csv \
    python3 /tmp/auto_update_once.py "$1" > "$OUT/ncu_$1_$2.csv" 2> "$OUT/ncu_$1_$2.err"
  python3 - "$OUT/ncu_$1_$2.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h, rows = rows[0], rows[1:]
ik, im, iv, ii, iu = (h.index(c) for c in ("Kernel Name", "Metric Name", "Metric Value", "ID", "Metric Unit"))
d = collections.OrderedDict()
for r in rows:
    d.setdefault((r[ii], r[ik]), {})[r[im]] = (r[iv], r[iu])
calls = list(d.items())
per_call = len(calls) // 4          # four calls, the same kernels each
tot = 0.0
for (i, name), m in calls[-per_call:]:
    tv, tu = m["gpu__time_duration.sum"]; bv, bu = m["dram__bytes.sum"]
    t = float(tv.replace(",", "")) * {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(tu, 1.0)
    tot += t
    if t > 20: print(f"{t:10.1f} us  {bv:>16s} {bu}  {name[:70]}")
print(f"total {tot:.1f} us over {per_call} kernels")
PY
done
