"""Compile cost of emulated programs per scheme: trace + lower and XLA compile
times, and the size of the program (StableHLO text, compiled HLO text and its
instruction count), on the local device (CPU is fine: the size is what
grows). ``auto`` is taken with its size thresholds off and the
device-independent cost model, so that every product keeps its run-time
choice at these small sizes; ``--model h200`` plans with the H200's shipped
cost model instead (the candidates auto compiles on an H200 with the cuda
backend), ``--compile-only`` does not run (large sizes on a CPU).

    PYTHONPATH=. python scripts/compile_size.py                 # cholesky n=512 block 128, 4 GEMMs
    PYTHONPATH=. python scripts/compile_size.py --apps gemms --schemes auto,fp16x3
    PYTHONPATH=. python scripts/compile_size.py --apps cholesky --n 8192 --block 1024 --model h200 --compile-only
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import jaxemu  # noqa: E402

AUTO = jaxemu.get_scheme("auto").replace(min_flops=0.0, min_dim=0, cost_model="counts")


def gemms(n_gemms=4, base=256):
    """n distinct-shape products, each feeding the next's operand."""
    shapes = [(base + 32 * i, base + 64, base + 16 * i) for i in range(n_gemms)]

    def f(*xs):
        out = 0.0
        for (a, b) in zip(xs[::2], xs[1::2]):
            out = out + jnp.sum(a @ b)
        return out
    rng = np.random.default_rng(0)
    args = []
    for m, k, n in shapes:
        args += [rng.uniform(-1, 1, (m, k)).astype(np.float32), rng.uniform(-1, 1, (k, n)).astype(np.float32)]
    return f, args, f"{n_gemms} GEMMs {shapes}"


def cholesky(n=512, block=128, shapes_only=False):
    from examples.cholesky import cholesky as chol, make_spd
    a = jax.ShapeDtypeStruct((n, n), jnp.float32) if shapes_only else make_spd(n, 1e3)[0]
    return (lambda a: chol(a, block)), [a], f"cholesky n={n} block {block} ({n // block - 1} GEMMs)"


def candidate_counts(f, args, scheme):
    """How many candidates auto compiles for each emulated product of f."""
    from jaxemu.auto import plan
    from jaxemu.dims import dot_shape
    out = []
    args = [jnp.zeros(x.shape, x.dtype) if isinstance(x, jax.ShapeDtypeStruct) else x for x in args]
    with jax.default_matmul_precision("highest"):
        infos = jaxemu.explain(f, *args, scheme=scheme)
    for d in infos:
        if d.scheme is None:
            continue
        ds = dot_shape(d.info.lhs, d.info.rhs, d.info.dimension_numbers)
        out.append(len(plan(ds.b, ds.m, ds.n, ds.k, scheme, jax.default_backend()).candidates))
    return out


def measure(f, args, scheme, run=True):
    g = jax.jit(jaxemu.emulate(f, scheme=scheme))
    with jax.default_matmul_precision("highest"):
        t0 = time.perf_counter()
        lowered = g.lower(*args)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
    hlo = compiled.as_text()
    ops = sum(1 for line in hlo.splitlines() if " = " in line and not line.lstrip().startswith(("//", "ROOT %tuple")))
    row = dict(lower_s=t1 - t0, compile_s=t2 - t1, stablehlo_chars=len(lowered.as_text()),
               hlo_chars=len(hlo), hlo_ops=ops)
    if run:
        out = jax.block_until_ready(compiled(*args))
        t3 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        row["run_s"] = time.perf_counter() - t3
        row["out"] = out
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--apps", default="gemms,cholesky")
    p.add_argument("--schemes", default="fp16x3,bf16x6,auto")
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--gemms", type=int, default=4)
    p.add_argument("--auto-block", type=int, default=None, help="auto's split granularity (default 128)")
    p.add_argument("--model", choices=("counts", "h200"), default="counts")
    p.add_argument("--compile-only", action="store_true")
    args = p.parse_args(argv)
    auto_scheme = AUTO
    if args.model == "h200":
        from jaxemu import auto, costs
        model = costs.model_for("NVIDIA H200", "cuda")
        auto._cost_model = lambda s, platform, backend: model
        auto_scheme = jaxemu.get_scheme("auto")
    if args.auto_block:
        auto_scheme = auto_scheme.replace(block=args.auto_block)
    print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}")
    for app in args.apps.split(","):
        f, xs, desc = gemms(args.gemms) if app == "gemms" else cholesky(args.n, args.block, args.compile_only)
        print(f"{desc}; auto's candidates per product: {candidate_counts(f, xs, auto_scheme)}")
        print(f"  {'scheme':<8}{'lower s':>9}{'compile s':>11}{'StableHLO chars':>17}{'HLO chars':>11}"
              f"{'HLO ops':>9}{'run s':>8}")
        for name in args.schemes.split(","):
            s = auto_scheme if name == "auto" else name
            r = measure(f, xs, s, run=not args.compile_only)
            print(f"  {name:<8}{r['lower_s']:>9.2f}{r['compile_s']:>11.2f}{r['stablehlo_chars']:>17,}"
                  f"{r['hlo_chars']:>11,}{r['hlo_ops']:>9,}{r.get('run_s', float('nan')):>8.3f}", flush=True)


if __name__ == "__main__":
    main()
