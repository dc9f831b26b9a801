"""Where auto's time goes on the k-means products (issue 13), on the GPU:

    JAX_PLATFORMS=cuda python scripts/auto_kmeans_overhead.py [--n 1048576 --d 256 --k 1024]

Per product of one Lloyd iteration, as the example writes them (the update
from labels through jax.nn.one_hot, so that emulate sees the exact operand),
under jax.jit(jaxemu.emulate(f, scheme)): fp32, fp16x3, auto; then auto's
data test alone on the same operands, and the f32 one-hot written to memory
alone (what a product pays when the one-hot has several consumers).
"""
from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jaxemu
from jaxemu import auto
from jaxemu import testing as T


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--k", type=int, default=1024)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.normal(size=(args.n, args.d)).astype(np.float32))
    c = jax.device_put(rng.normal(size=(args.k, args.d)).astype(np.float32))
    lab = jax.device_put(rng.integers(0, args.k, size=args.n).astype(np.int32))
    s = jaxemu.get_scheme("auto")

    def distances(x, c, lab):
        return x @ c.T

    def update(x, c, lab):
        return jax.nn.one_hot(lab, args.k, dtype=x.dtype).T @ x

    def test_dist(x, c, lab):
        return auto.DataTest.of(x[None], c.T[None], s).fp16x3_ok

    def test_update(x, c, lab):
        a = jax.nn.one_hot(lab, args.k, dtype=x.dtype).T
        return auto.DataTest.of(a[None], x[None], s, (True, False)).fp16x3_ok

    def one_hot(x, c, lab):
        return jax.nn.one_hot(lab, args.k, dtype=x.dtype).T

    rows = []
    for pname, f, test in (("distances", distances, test_dist), ("update", update, test_update)):
        for name in ("fp32", "fp16x3", "auto"):
            g = jax.jit(jaxemu.emulate(f, scheme=name))
            rows.append((pname, name, T.median_time(lambda: g(x, c, lab), args.reps)))
        g = jax.jit(test)
        rows.append((pname, "data test alone", T.median_time(lambda: g(x, c, lab), args.reps)))
    g = jax.jit(one_hot)
    rows.append(("update", "f32 one-hot alone", T.median_time(lambda: g(x, c, lab), args.reps)))
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}; {jaxemu.info().auto_cost_model}")
    print(f"{'product':10s} {'config':20s} {'ms':>8s}")
    for pname, name, t in rows:
        print(f"{pname:10s} {name:20s} {t * 1e3:8.3f}")


if __name__ == "__main__":
    main()
