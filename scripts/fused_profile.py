"""Per-kernel time of one emulated product (run under ncu, see below): which
XLA fusions and kernels an emulated product launches and what each costs.

    ncu --clock-control none --csv \
        --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
        python scripts/fused_profile.py 1x1048576x256x1024 fp16x3
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import jaxemu  # noqa: E402


def main():
    spec, name = sys.argv[1], sys.argv[2]
    bsz, m, k, n = (int(x) for x in spec.split("x"))
    rng = np.random.default_rng(0)
    pre = (bsz,) if bsz > 1 else ()
    a = jax.device_put(rng.uniform(-1, 1, pre + (m, k)).astype(np.float32))
    b = jax.device_put(rng.uniform(-1, 1, pre + (k, n)).astype(np.float32))
    if name == "sgemm":
        f = jax.jit(lambda x, y: jnp.matmul(x, y, precision="highest"))
    else:
        f = jax.jit(lambda x, y: jaxemu.matmul(x, y, scheme=name))
    if os.environ.get("HLO_OUT"):
        with open(os.environ["HLO_OUT"], "w") as fh:
            fh.write(f.lower(a, b).compile().as_text())
    f(a, b).block_until_ready()  # under ncu: the kernels of this call and the next are profiled
    f(a, b).block_until_ready()


if __name__ == "__main__":
    main()
