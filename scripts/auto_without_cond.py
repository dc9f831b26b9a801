"""How much of auto's overhead over fp16x3 is the conditional's host round
trip: fp16x3, auto, and auto with its data test computed on the device but
its choice not acted on (fp16x3's branch runs unconditionally, the choice's
index kept alive by an optimization barrier): the bound a choice made on
the device (flag-gated kernels, docs/auto.md) could reach with today's
test; and auto with fp16x3's branch run unconditionally, then a
conditional that keeps its C or redoes the product (the host waits for
the predicate after the product is queued); and auto's own choice on the
device (JAXEMU_CUDA_DEVICE_CHOICE=1: gated kernels, no conditional). Median ms per call, calls back to back, one process.
  JAX_PLATFORMS=cuda python scripts/auto_without_cond.py [B x M x K x N ...]"""
import os
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


_depth = [0]


def fp16x3_then_redo(index, branches, operands, shape):
    """fp16x3's branch unconditionally, then a conditional that keeps its C
    or redoes the product (auto's refused branch): the host waits for the
    predicate behind the product, not before it."""
    if _depth[0]:  # (the refused branch's own choice: as auto makes it)
        return one_of(index, branches, operands, shape)
    _depth[0] += 1
    try:
        c = branches[1](*operands)
        c = lax.cond(index == 0, lambda c, ops: branches[0](*ops).reshape(c.shape), lambda c, ops: c, c, operands)
    finally:
        _depth[0] -= 1
    return c.reshape(shape)


def run(f, patched):
    xla.one_of = {False: one_of, True: fp16x3_branch_only, "redo": fp16x3_then_redo}.get(patched, one_of)
    # "device": auto's own choice on the device (JAXEMU_CUDA_DEVICE_CHOICE,
    # read when the product is lowered)
    os.environ["JAXEMU_CUDA_DEVICE_CHOICE"] = "1" if patched == "device" else "0"
    jax.clear_caches()
    try:
        jf = jax.jit(f)
        hlo = jf.lower(a, b).compile().as_text()
        return time_fn(jf, a, b, 7) * 1e3, hlo.count("custom_call_target=\"jaxemu_"), jf(a, b)
    except Exception as e:  # a mode that fails is reported, the others still run
        print(f"FAILED {patched}: {type(e).__name__}: {str(e)[:300]}")
        return float("nan"), 0, None
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
            "auto, redo after fp16x3": run(lambda x, y: jaxemu.matmul(x, y, scheme="auto"), "redo"),
            "auto, choice on device": run(lambda x, y: jaxemu.matmul(x, y, scheme="auto"), "device"),
            "fp16x3 again": run(lambda x, y: jaxemu.matmul(x, y, scheme="fp16x3"), False)}
    t0, _, c0 = rows["fp16x3"]
    for name, (t, calls, c) in rows.items():
        same = c is not None and bool(jnp.array_equal(c, c0))
        print(f"{spec:18s} {name:24s} {t:8.4f} ms  x{t / t0:5.3f} of fp16x3  ({calls} jaxemu custom calls; "
              f"C {'the same bits as' if same else 'differs from'} fp16x3's)")
