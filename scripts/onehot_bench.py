"""The k-means centre update, one_hot(labels)^T @ X, as a user writes it,
under jax.jit(jaxemu.emulate(f, scheme)) against FP32 (precision highest),
in one process: the one-hot operand is found exact by emulate and runs as
one slice (FloatSplit.exact). ``--no-exact`` hides it from emulate (a
float32 one-hot that is not a convert of a bool: the full scheme), for the
same-run comparison.

    JAX_PLATFORMS=cuda python scripts/onehot_bench.py [--n 1048576 --d 256 --k 1024]
"""
from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jaxemu
from jaxemu import testing as T


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--k", type=int, default=1024)
    p.add_argument("--schemes", default="fp16x3,bf16x6,bf16x3,tf32x3")
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.normal(size=(args.n, args.d)).astype(np.float32))
    lab = jax.device_put(rng.integers(0, args.k, size=args.n).astype(np.int32))

    def update(x, lab):
        return jax.nn.one_hot(lab, args.k, dtype=x.dtype).T @ x

    def hidden(x, lab):
        # The same one-hot, made by arithmetic emulate does not follow (a
        # product): the full scheme runs.
        oh = jnp.maximum(1.0 - jnp.abs(lab[:, None].astype(x.dtype) - jnp.arange(args.k, dtype=x.dtype)), 0.0)
        return oh.T @ x

    ref = np.zeros((args.k, args.d))
    np.add.at(ref, np.asarray(lab), np.asarray(x, np.float64))
    fp32 = jax.jit(lambda x, lab: jnp.matmul(jax.nn.one_hot(lab, args.k).T, x, precision="highest"))
    t32 = T.median_time(lambda: fp32(x, lab), args.reps)
    e32 = T.relerr(np.asarray(fp32(x, lab)), ref)
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}: one_hot({args.n}, {args.k})^T @ X({args.n}, "
          f"{args.d})")
    print(f"{'config':22s} {'ms':>8s} {'x FP32':>7s} {'error':>9s} {'/ FP32':>7s}")
    print(f"{'fp32 (highest)':22s} {t32 * 1e3:8.3f} {1.0:7.2f} {e32:9.2e} {1.0:7.2f}")
    for name in args.schemes.split(","):
        for label, f in (("exact", update), ("full", hidden)):
            g = jax.jit(jaxemu.emulate(f, scheme=name))
            t = T.median_time(lambda: g(x, lab), args.reps)
            e = T.relerr(np.asarray(g(x, lab)), ref)
            print(f"{name + ' ' + label:22s} {t * 1e3:8.3f} {t32 / t:7.2f} {e:9.2e} {e / e32:7.2f}")


if __name__ == "__main__":
    main()
