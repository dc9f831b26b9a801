"""How much of auto's overhead over fp16x3 is the conditional's host round
trip: fp16x3, auto, and auto with its data test computed on the device but
its choice not acted on (fp16x3's branch runs unconditionally, the choice's
index kept alive by an optimization barrier): the bound a choice made on
the device (flag-gated kernels, docs/auto.md) could reach with today's
test. Median ms per call, calls back to back, one process.
  JAX_PLATFORMS=cuda python scripts/auto_without_cond.py [B x M x K x N ...]"""
import sys

import jax
import jax.numpy as jnp
from jax import lax

import jaxemu
from jaxemu.backends import xla
from jaxemu.bench import time_fn

one_of = xla.one_of


def fp16x3_branch_only(index, branches, operands, shape):
    c = branches[1](*operands)  # auto's fp16x3 branch (auto_dot: refused, fp16x3, fp16x3 fits)
    c, _ = lax.optimization_barrier((c, index))
    return c.reshape(shape)


def run(f, patched):
    xla.one_of = fp16x3_branch_only if patched else one_of
    try:
        jf = jax.jit(f)
        hlo = jf.lower(a, b).compile().as_text()
        return time_fn(jf, a, b, 7) * 1e3, hlo.count("custom_call_target=\"jaxemu_")
    finally:
        xla.one_of = one_of


print(jax.devices()[0].device_kind, "jax", jax.__version__)
for spec in sys.argv[1:] or ["1x2048x2048x2048", "1x4096x4096x4096", "8x2048x2048x2048"]:
    bs, m, k, n = map(int, spec.split("x"))
    key = jax.random.PRNGKey(0)
    a = jax.random.uniform(key, (bs, m, k), jnp.float32, -1, 1)
    b = jax.random.uniform(jax.random.fold_in(key, 1), (bs, k, n), jnp.float32, -1, 1)
    rows = {"fp16x3": run(lambda x, y: jaxemu.matmul(x, y, scheme="fp16x3"), False),
            "auto": run(lambda x, y: jaxemu.matmul(x, y, scheme="auto"), False),
            "auto, no conditional": run(lambda x, y: jaxemu.matmul(x, y, scheme="auto"), True),
            "fp16x3 again": run(lambda x, y: jaxemu.matmul(x, y, scheme="fp16x3"), False)}
    t0 = rows["fp16x3"][0]
    for name, (t, calls) in rows.items():
        print(f"{spec:18s} {name:22s} {t:8.4f} ms  x{t / t0:5.3f} of fp16x3  ({calls} jaxemu custom calls)")
