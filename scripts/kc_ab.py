"""A scheme against itself with a shorter promotion interval kc, same
process (stop 63: hi*hi promoted every half K-tile, ffi/fused/params.h:
Problem::kc_sub):

    JAX_PLATFORMS=cuda python scripts/kc_ab.py [--shapes 1x8192x128x262144,...] [--pairs fp16x3:32,tf32x3:16]

Per shape (B x M x K x N) and pair scheme:kc: ms of SGEMM, of the scheme and
of its kc variant on uniform(-1,1) (interleaved timing runs, the median of
each), and the error / SGEMM's (relative Frobenius norm against float64,
SGEMM's on the same operands) of both on four input laws.
"""
from __future__ import annotations

import argparse
import faulthandler

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jaxemu
from jaxemu import testing as T

SHAPES = "1x8192x128x262144,1x1048576x256x1024,1x2048x2048x2048,1x8192x8192x8192"
LAWS = ("uniform(-1,1)", "uniform(0,1)", "normal(0,1)", "wide-exp")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default=SHAPES)
    p.add_argument("--pairs", default="fp16x3:32,tf32x3:16,bf16x6:32")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--hang-s", type=float, default=240, help="dump the stacks and exit if a shape takes longer")
    args = p.parse_args(argv)
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}", flush=True)
    pairs = []
    for item in args.pairs.split(","):
        name, kc = item.split(":")
        base = jaxemu.get_scheme(name)
        pairs.append((name, base, base.replace(kc=int(kc))))
    sgemm = jax.jit(lambda a, b: jnp.matmul(a, b, precision=lax.Precision.HIGHEST))
    summary = []
    for shape in args.shapes.split(","):
        faulthandler.dump_traceback_later(args.hang_s, exit=True)
        bsz, m, k, n = (int(x) for x in shape.split("x"))
        pre = (bsz,) if bsz > 1 else ()
        fns = {}
        for name, base, var in pairs:
            fns[(name, base.kc)] = jax.jit(lambda a, b, s=base: jaxemu.matmul(a, b, scheme=s))
            fns[(name, var.kc)] = jax.jit(lambda a, b, s=var: jaxemu.matmul(a, b, scheme=s))
        errs = {key: {} for key in fns}
        ms = {key: [] for key in fns}
        t32 = None
        for law in LAWS:
            rng = np.random.default_rng(0)
            a = jax.device_put(T.sample(law, pre + (m, k), rng))
            b = jax.device_put(T.sample(law, pre + (k, n), rng))
            with jax.enable_x64(True):
                ref = jnp.matmul(a.astype(jnp.float64), b.astype(jnp.float64), precision=lax.Precision.HIGHEST)
                nref = jnp.linalg.norm(ref)

                def err(c):
                    return float(jnp.linalg.norm(c.astype(jnp.float64) - ref) / nref)
                e32 = err(sgemm(a, b))
                for key, f in fns.items():
                    errs[key][law] = err(f(a, b)) / e32
            if law == "uniform(-1,1)":
                t32 = 1e3 * T.median_time(lambda: sgemm(a, b), args.reps, 0.02)
                for _ in range(3):  # interleaved: a drift in the clock hits both alike
                    for key, f in fns.items():
                        ms[key].append(1e3 * T.median_time(lambda: f(a, b), args.reps, 0.02))
            a = b = ref = None  # (kNN's float64 C is 16 GiB: freed before the next law's)
        print(f"{shape}: SGEMM {t32:.3f} ms", flush=True)
        for key in fns:
            t = float(np.median(ms[key]))
            worst = max(errs[key].values())
            line = (f"  {key[0]:8s} kc={key[1]!s:4s} {t:8.3f} ms {t32 / t:5.2f}x  err/SGEMM "
                    + " ".join(f"{law} {v:.2f}" for law, v in errs[key].items()) + f"  worst {worst:.2f}")
            print(line, flush=True)
            summary.append(f"{shape:20s} {key[0]:8s} kc={key[1]!s:4s} {t32 / t:5.2f}x SGEMM  worst err {worst:.2f}")
    faulthandler.cancel_dump_traceback_later()
    print("\n".join(summary))


if __name__ == "__main__":
    main()
