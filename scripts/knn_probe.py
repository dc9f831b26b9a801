"""Where the kNN application's time goes (issue 11), on one chunk of its
queries and on the whole search, in one process:

    python scripts/knn_probe.py [--n 1048576] [--m 8192] [--d 128] [--chunk 1024]

Times, for FP32 (precision highest) and the FP32-class schemes: the distance
GEMM of one chunk alone, lax.top_k alone on a chunk's distances, and the
whole chunked search (examples/knn.py: knn_chunked): the search's time less
(chunks x the GEMM's) is what no GEMM can speed up; and examples/knn.py's
top_k_grouped on one chunk, with whether it gives lax.top_k's indices.
(H200, stop 34: an exact two-stage top_k, blocks of 1024 columns, made the
search 5x slower.) And a third formulation, to see whether XLA's top_k is
faster on shorter rows: all queries against blocks of ``--db-block``
database points in a lax.scan, a running top-k merged per block
(``scan_search``; the same neighbours as knn_chunked up to ties, which the
script counts). H200, stop 35: 235 ms against the chunked search's 171
(FP32), so it is not faster.
"""
from __future__ import annotations

import argparse
import contextlib

import jax
import jax.numpy as jnp
import numpy as np

import jaxemu
from examples import knn as kn
from jaxemu.testing import median_time


def scan_search(queries, database, k, block):
    """Indices (m, k) of each query's k nearest database rows: lax.scan over
    blocks of ``block`` rows of the database (n a multiple of block), each
    block's distances for all queries, their top k merged with the k best
    so far (candidates in index order, so ties resolve to the lower index as
    in one top_k over the whole row)."""
    m, n = queries.shape[0], database.shape[0]
    if n % block:
        raise ValueError(f"database size {n} is not a multiple of the block {block}")
    qq = jnp.sum(queries * queries, axis=1)[:, None]

    def step(best, i):
        x = jax.lax.dynamic_slice_in_dim(database, i * block, block)
        d2 = qq - 2.0 * (queries @ x.T) + jnp.sum(x * x, axis=1)[None, :]
        v, j = jax.lax.top_k(-d2, k)
        cand_v = jnp.concatenate([best[0], v], axis=1)
        cand_i = jnp.concatenate([best[1], j + i * block], axis=1)
        v2, sel = jax.lax.top_k(cand_v, k)
        return (v2, jnp.take_along_axis(cand_i, sel, axis=1)), None

    init = (jnp.full((m, k), -jnp.inf, queries.dtype), jnp.zeros((m, k), jnp.int32))
    (_, idx), _ = jax.lax.scan(step, init, jnp.arange(n // block))
    return idx


def knn_before(queries, database, k):
    """examples/knn.py's knn with stop 36's scores: -d2 whole, then
    top_k_grouped (today's: the candidates by groups again), so it differs
    from knn in the score formula alone."""
    d2 = (jnp.sum(queries * queries, axis=1)[:, None] - 2.0 * (queries @ database.T)
          + jnp.sum(database * database, axis=1)[None, :])
    return kn.top_k_grouped(-d2, k, kn.GROUP)[1]


def chunked(f, queries, database, k, chunk):
    m = queries.shape[0]
    return jax.lax.map(lambda q: f(q, database, k), queries.reshape(m // chunk, chunk, -1)).reshape(m, k)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--m", type=int, default=8192)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--chunk", type=int, default=1024)
    p.add_argument("--db-block", type=int, default=65536)
    p.add_argument("--schemes", default="fp32,fp16x3,bf16x6")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--before", action="store_true",
                   help="only the search as examples/knn.py writes it against knn_before (stop 36's scores), per scheme")
    args = p.parse_args(argv)
    q, db = kn.make_data(args.n, args.m, args.d, seed=0, offset=4.0)
    qj, dbj = jnp.asarray(q), jnp.asarray(db)
    q1 = qj[:args.chunk]
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}: n={args.n} m={args.m} d={args.d} "
          f"k={args.k} chunk={args.chunk}")
    if args.before:
        for s in args.schemes.split(","):
            ctx = jax.default_matmul_precision("highest") if s == "fp32" else contextlib.nullcontext()
            wrap = (lambda f: f) if s == "fp32" else (lambda f: jaxemu.emulate(f, scheme=s))
            now = jax.jit(wrap(kn.knn_chunked), static_argnums=(2, 3))
            before = jax.jit(wrap(lambda q, x, k, c: chunked(knn_before, q, x, k, c)), static_argnums=(2, 3))
            with ctx:
                t_now = median_time(lambda: now(qj, dbj, args.k, args.chunk), args.repeats)
                t_before = median_time(lambda: before(qj, dbj, args.k, args.chunk), args.repeats)
                t_now2 = median_time(lambda: now(qj, dbj, args.k, args.chunk), args.repeats)
                diff = int(np.sum(np.asarray(now(qj, dbj, args.k, args.chunk))
                                  != np.asarray(before(qj, dbj, args.k, args.chunk))))
            print(f"{s:8s} search: knn {t_now * 1e3:7.1f} / {t_now2 * 1e3:7.1f} ms, knn_before "
                  f"{t_before * 1e3:7.1f} ms ({diff} indices differ)")
        return
    d2 = jax.jit(lambda q, x: jnp.sum(x * x, axis=1)[None, :] - 2.0 * (q @ x.T))(q1, dbj)
    top_k = jax.jit(lambda d: jax.lax.top_k(-d, args.k)[1])  # (one jit: a lambda per call would recompile)
    grouped = jax.jit(lambda d: kn.top_k_grouped(-d, args.k)[1])
    t_topk = median_time(lambda: top_k(d2), args.repeats)
    t_grouped = median_time(lambda: grouped(d2), args.repeats)
    same = bool(np.array_equal(np.asarray(top_k(d2)), np.asarray(grouped(d2))))
    chunks = args.m // args.chunk
    print(f"one chunk's distances: lax.top_k {t_topk * 1e3:.2f} ms, top_k_grouped {t_grouped * 1e3:.2f} ms "
          f"(the same indices: {same})")
    for s in args.schemes.split(","):
        ctx = jax.default_matmul_precision("highest") if s == "fp32" else contextlib.nullcontext()
        wrap = (lambda f: f) if s == "fp32" else (lambda f: jaxemu.emulate(f, scheme=s))
        gemm = jax.jit(wrap(lambda q, x: q @ x.T))
        search = jax.jit(wrap(kn.knn_chunked), static_argnums=(2, 3))
        scan = jax.jit(wrap(scan_search), static_argnums=(2, 3))
        with ctx:
            t_gemm = median_time(lambda: gemm(q1, dbj), args.repeats)
            t_search = median_time(lambda: search(qj, dbj, args.k, args.chunk), args.repeats)
            t_scan = median_time(lambda: scan(qj, dbj, args.k, args.db_block), args.repeats)
            diff = int(np.sum(np.asarray(search(qj, dbj, args.k, args.chunk))
                              != np.asarray(scan(qj, dbj, args.k, args.db_block))))
        print(f"{s:8s} GEMM of one chunk {t_gemm * 1e3:7.2f} ms   search {t_search * 1e3:7.1f} ms, "
              f"less {chunks} GEMMs {(t_search - chunks * t_gemm) * 1e3:7.1f} ms;   scan over database blocks "
              f"{t_scan * 1e3:7.1f} ms ({diff} indices differ)")


if __name__ == "__main__":
    main()
