"""B's split as B^T's rows (the default where B is the transpose of a (N, K)
array; JAXEMU_CUDA_B_ROWS=1: on every B, XLA transposing it first) against
the transposed split kernel (JAXEMU_CUDA_B_ROWS=0), same process, same inputs:

    JAX_PLATFORMS=cuda python scripts/b_rows_ab.py [--scheme fp16x3]

One line per case: ms with the transposed kernel, with the rows kernel, and
whether C's bits are the same (they must be: the same slices). Cases marked
"x @ y.T" take B as the transpose of a (N, K) array, as kNN's distances do.
"""
from __future__ import annotations

import argparse
import os

import jax
import numpy as np

import jaxemu
from jaxemu.testing import median_time

CASES = [  # name, batch, M, K, N, B given as y.T
    ("8192^3", 1, 8192, 8192, 8192, False),
    ("8 x 2048^3", 8, 2048, 2048, 2048, False),
    ("k-means update", 1, 1024, 1 << 20, 256, False),
    ("kNN-like, x @ y.T", 1, 8192, 128, 262144, True),
    ("kNN chunk, x @ y.T", 1, 2048, 128, 1 << 20, True),
    ("k-means distances, x @ c.T", 1, 1 << 20, 256, 1024, True),
    ("4096^3, x @ y.T", 1, 4096, 4096, 4096, True),
]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scheme", default="fp16x3")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--rows", default="", help='JAXEMU_CUDA_B_ROWS for the second column ("": the default)')
    args = p.parse_args(argv)
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}, scheme {args.scheme}")
    rng = np.random.default_rng(0)
    for name, bsz, m, k, n, yt in CASES:
        a = rng.standard_normal((bsz, m, k) if bsz > 1 else (m, k), dtype=np.float32)
        y = rng.standard_normal((n, k) if yt else ((bsz, k, n) if bsz > 1 else (k, n)), dtype=np.float32)
        a, y = jax.device_put(a), jax.device_put(y)
        fns = {}
        for flag in ("0", "1"):
            if flag == "1" and not args.rows:
                os.environ.pop("JAXEMU_CUDA_B_ROWS", None)
            else:
                os.environ["JAXEMU_CUDA_B_ROWS"] = flag if flag == "0" else args.rows
            f = jax.jit(jaxemu.emulate((lambda a, y: a @ y.T) if yt else (lambda a, y: a @ y), scheme=args.scheme))
            jax.block_until_ready(f(a, y))  # traced with the switch as set
            fns[flag] = f
        os.environ.pop("JAXEMU_CUDA_B_ROWS", None)
        same = bool(np.array_equal(np.asarray(fns["0"](a, y)), np.asarray(fns["1"](a, y))))
        t = {f: [] for f in fns}
        for _ in range(2):  # alternated
            for f in fns:
                t[f].append(median_time(lambda: fns[f](a, y), args.reps, min_rep_s=0.02))
        t0, t1 = min(t["0"]), min(t["1"])
        print(f"{name:28s} transposed {t0 * 1e3:8.3f} ms   rows {t1 * 1e3:8.3f} ms   rows/transposed {t1 / t0:6.3f}"
              f"   same bits {same}")
        del a, y, fns


if __name__ == "__main__":
    main()
