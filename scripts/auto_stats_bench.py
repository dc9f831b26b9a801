"""auto's data test on the GPU with XLA's reductions and with the statistics
kernels (JAXEMU_CUDA_STATS, ffi/stats), same process (issues 11 and 13):

    JAX_PLATFORMS=cuda python scripts/auto_stats_bench.py [--json out.json]

On the k-means products (1M x 256 data, 1024 centres; the update from the
labels through jax.nn.one_hot, as the example writes it) and 8192^3
normal(0,1): fp16x3, auto with each statistics path, the data test alone
with each, and the decision each test makes.
"""
from __future__ import annotations

import argparse
import json
import os

import jax
import jax.numpy as jnp
import numpy as np

import jaxemu
from jaxemu import auto
from jaxemu import testing as T
from jaxemu.backends import cuda_stats


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--json")
    args = p.parse_args(argv)
    n, d, k = 1 << 20, 256, 1024
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.normal(size=(n, d)).astype(np.float32))
    c = jax.device_put(rng.normal(size=(k, d)).astype(np.float32))
    lab = jax.device_put(rng.integers(0, k, size=n).astype(np.int32))
    sa, sb = (jax.device_put(v) for v in T.operands("normal(0,1)", 8192, 8192, 8192, 0))
    s = jaxemu.get_scheme("auto")
    # name: (the product as a user writes it, auto's operands for the test
    # alone, exact flags, arguments); arrays go in as arguments (captured,
    # they would become constants of the compiled program).
    shapes = {
        "update 1024x1Mx256": (lambda lab, x: jax.nn.one_hot(lab, k, dtype=x.dtype).T @ x,
                               lambda lab, x: (jax.nn.one_hot(lab, k, dtype=jnp.float16).T[None], x[None]),
                               (True, False), (lab, x)),
        "distances 1Mx256x1024": (lambda x, c: x @ c.T, lambda x, c: (x[None], c.T[None]), (False, False), (x, c)),
        "8192^3 normal": (lambda a, b: a @ b, lambda a, b: (a[None], b[None]), (False, False), (sa, sb)),
    }
    rows = []
    for shape, (prod, ops, exact, xs) in shapes.items():
        r = {"shape": shape}
        for name, scheme, stats in (("fp16x3", "fp16x3", "0"), ("auto, XLA stats", "auto", "0"),
                                    ("auto, kernels", "auto", "1")):
            os.environ["JAXEMU_CUDA_STATS"] = stats   # read at trace time
            g = jax.jit(jaxemu.emulate(lambda *xs, prod=prod: prod(*xs), scheme=scheme))
            g(*xs).block_until_ready()
            r[name] = T.median_time(lambda: g(*xs), args.reps)
        for name, kern in (("test, XLA", None), ("test, kernels", cuda_stats.KERNELS)):
            g = jax.jit(lambda *xs, kern=kern, ops=ops, exact=exact: (lambda t: (t.fp16x3_ok, t.normwise_ratio[0]))(
                auto.DataTest.of(*ops(*xs), s, exact, kern)))
            ok, ratio = g(*xs)
            r[name] = T.median_time(lambda: g(*xs), args.reps)
            r[name + " fp16x3_ok"] = bool(ok)
            r[name + " ratio"] = float(ratio)
        rows.append(r)
    os.environ.pop("JAXEMU_CUDA_STATS")
    # The kernels alone: rows of the distances' X (1M x 256 float32) with
    # the probe, on 32 lanes and on row_lanes' choice; columns of X and of
    # the 8192^2 operand. Memory speed: bytes / time.
    v = jnp.ones((1, d), jnp.float32)
    kern = []
    for lanes in (32, 16, 8):
        g = jax.jit(lambda x, v, lanes=lanes: cuda_stats.rows(x[None], v, lanes))
        kern.append((f"rows of X, {lanes} lanes", x.nbytes, T.median_time(lambda: g(x, v), args.reps)))
    for name, op in (("columns of X", x), ("columns of 8192^2", sb)):
        g = jax.jit(lambda b: cuda_stats.columns(b[None]))
        kern.append((name, op.nbytes, T.median_time(lambda: g(op), args.reps)))
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}")
    print(f"{'shape':24s} {'fp16x3':>8s} {'auto XLA':>9s} {'auto krn':>9s} {'test XLA':>9s} {'test krn':>9s}"
          f"  fp16x3 allowed (XLA, kernels)")
    for r in rows:
        print(f"{r['shape']:24s} {r['fp16x3'] * 1e3:8.3f} {r['auto, XLA stats'] * 1e3:9.3f} "
              f"{r['auto, kernels'] * 1e3:9.3f} {r['test, XLA'] * 1e3:9.3f} {r['test, kernels'] * 1e3:9.3f}"
              f"  {r['test, XLA fp16x3_ok']}, {r['test, kernels fp16x3_ok']}"
              f" (ratio {r['test, XLA ratio']:.3g}, {r['test, kernels ratio']:.3g})")
    for name, nbytes, t in kern:
        print(f"{name:24s} {t * 1e3:8.3f} ms  {nbytes / t / 1e12:5.2f} TB/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": jax.devices()[0].device_kind, "jax": jax.__version__, "rows": rows,
                       "kernels": [dict(name=k, bytes=b, s=t) for k, b, t in kern]}, f, indent=1)


if __name__ == "__main__":
    main()
