"""The fused GEMM's epilogue variants, same process (JAXEMU_CUDA_EPI, read by
ffi/fused/launch.cuh at each launch): bit 0 = the per-value unscaling (the
reference), bit 1 = C stored from registers instead of by TMA.

    JAX_PLATFORMS=cuda python scripts/epi_ab.py [--shapes ...] [--schemes fp16x3,bf16x6]

Per shape (B x M x K x N), law and scheme: ms of SGEMM and of each variant,
x SGEMM, and whether each variant's C has the bits of the reference's.
"""
from __future__ import annotations

import argparse
import faulthandler
import os

import jax
import jax.numpy as jnp

import jaxemu
from jaxemu import testing as T

SHAPES = "1x8192x128x65536,1x2048x128x1048576,1x1048576x256x1024,1x8192x8192x8192,1x2048x2048x2048,8x2048x2048x2048,1x1000x300x777"
VARIANTS = {"ref": "1", "new": "0", "reg": "2", "ref+reg": "3"}


def draw(key, shape, law):
    x = jax.random.normal(key, shape, jnp.float32)
    if law == "wide":  # normal * 2^U[-16, 16)
        e = jax.random.randint(jax.random.fold_in(key, 1), shape, -16, 16)
        x = x * jnp.exp2(e.astype(jnp.float32))
    return x


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default=SHAPES)
    p.add_argument("--schemes", default="fp16x3,bf16x6")
    p.add_argument("--laws", default="normal,wide")
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args(argv)
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}", flush=True)
    for shape in args.shapes.split(","):
        faulthandler.dump_traceback_later(150, exit=True)
        bsz, m, k, n = (int(x) for x in shape.split("x"))
        pre = (bsz,) if bsz > 1 else ()
        for law in args.laws.split(","):
            ka, kb = jax.random.split(jax.random.PRNGKey(0))
            a, b = draw(ka, pre + (m, k), law), draw(kb, pre + (k, n), law)
            sgemm = jax.jit(lambda a, b: jnp.matmul(a, b, precision="highest"))
            t32 = 1e3 * T.median_time(lambda: sgemm(a, b), args.reps, 0.02)
            for name in args.schemes.split(","):
                f = jax.jit(lambda a, b, name=name: jaxemu.matmul(a, b, scheme=name))
                ms, ref, same = {}, None, {}
                for v, flag in VARIANTS.items():
                    os.environ["JAXEMU_CUDA_EPI"] = flag
                    ms[v] = 1e3 * T.median_time(lambda: f(a, b), args.reps, 0.02)
                    out = f(a, b)
                    if ref is None:
                        ref = out
                    else:
                        same[v] = bool(jnp.all((out == ref) | (jnp.isnan(out) & jnp.isnan(ref))))
                    del out
                os.environ.pop("JAXEMU_CUDA_EPI")
                del ref
                cols = "  ".join(f"{v} {ms[v]:7.3f} ({t32 / ms[v]:.2f}x{'' if v == 'ref' else ', ' + ('same' if same[v] else 'DIFFER')})"
                                 for v in VARIANTS)
                print(f"{shape:20s} {law:6s} {name:7s} sgemm {t32:8.3f}  {cols}", flush=True)
        faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    main()
