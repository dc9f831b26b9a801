"""Brute-force k-nearest-neighbour search with the distances computed by a GEMM.

    ||q - x||^2 = ||q||^2 - 2 q.x + ||x||^2,   then the k smallest per query

The (queries x features) @ (features x database) product is the whole cost of
the search. Written in plain JAX and run as
`jax.jit(jaxemu.emulate(knn, scheme=s))`. Data away from the origin make the
expansion cancel, so a one-pass BF16 or TF32 product reorders close
neighbours; FP32-class schemes return the FP32 neighbours.

What it shows: per scheme, recall@k against the exact neighbours (computed
with numpy in float64), next to the FP32 product's own recall, and the median
search time.

Similarity search is a typical GEMM-bound FP32 application of the emulation
papers: APE (Ma et al., "Efficiently emulating high-bitwidth computation with
low-bitwidth hardware", ICS 2022) and MixPert (LCTES 2024) report their
emulated SGEMM inside such applications.

    python examples/knn.py --n 8192 --queries 256 --k 10 --schemes fp32,bf16,bf16x6,fp16x3
"""
from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jaxemu
from jaxemu.testing import median_time

DEFAULT_SCHEMES = "fp32,bf16,tf32,bf16x3,bf16x6,fp16x3,int8_l4"


# -- the algorithm: plain JAX -------------------------------------------------

# XLA's top_k over rows of 2^20 distances reads them at ~0.3 TB/s (H200,
# docs/applications.md): 58 % of the FP32 search's time. top_k_grouped needs
# one reduction over them (at memory speed) and two top_k over short rows.
GROUP = 1024
# The k x GROUP candidates are taken the same way, in groups of SUBGROUP:
# lax.top_k over a chunk's 2048 rows of 10240 candidates took 1.34 ms on an
# H200, as long as the group maxima's pass over all 2^20 distances per row.
SUBGROUP = 32


def _order_keys(x):
    """Integers in the order lax.top_k gives floats (IEEE total order: -NaN <
    -inf < ... < -0 < +0 < ... < +inf < +NaN): the bits, with the other bits
    of negative values flipped. A max over them is exact, NaN and signed
    zeros included, which a float max is not."""
    if jnp.issubdtype(x.dtype, jnp.integer):
        return x
    if x.dtype not in (jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64):
        raise ValueError(f"top_k_grouped: integer or float16/bfloat16/float32/float64 data, got {x.dtype}")
    itype = {2: jnp.int16, 4: jnp.int32, 8: jnp.int64}[x.dtype.itemsize]
    bits = jax.lax.bitcast_convert_type(x, itype)
    return jnp.where(bits < 0, bits ^ jnp.iinfo(itype).max, bits)


def top_k_grouped(x, k, group=GROUP):
    """lax.top_k(x, k) along the last axis of x (rows, n), exactly: the same
    values and the same indices (equal values: the lower index first; NaN
    and signed zeros in lax.top_k's order). n must be a multiple of
    ``group``, n // group >= k.

    The row is cut into groups of ``group`` elements. Each of the k largest
    elements lies in one of the k groups with the largest maxima (equal
    maxima: the lower group first): every group ranked before its own holds
    an element ranked before it (a larger value, or an equal one at a lower
    index), and only k - 1 elements are. So the top k of those k groups,
    taken in index order, are the top k of the row. The maxima are taken in
    lax.top_k's own order (``_order_keys``)."""
    rows, n = x.shape
    if n % group or n // group < k:
        raise ValueError(f"top_k_grouped: n = {n} must be a multiple of group = {group} with n // group >= k = {k}")
    g = x.reshape(rows, n // group, group)
    return _top_k_of_groups(lambda sel: g if sel is None else jnp.take_along_axis(g, sel[:, :, None], axis=1),
                            rows, k, group)


def _top_k_of_groups(groups, rows, k, group):
    """top_k_grouped over values given by ``groups(sel)``: with sel None, all
    of them as (rows, n // group, group); else those of the groups ``sel``
    (rows, s), as (rows, s, group). A function, not an array, so that the
    values of the few candidate groups can be computed from what they are
    made of (kNN: the product and the norms), with no array of all the
    scores beside the product. (On an H200 this measured the same as
    gathering from the scores: XLA had not written them out either.)"""
    _, best = jax.lax.top_k(jnp.max(_order_keys(groups(None)), axis=2), k)  # the k groups with the largest maxima
    best = jnp.sort(best, axis=1)                               # in index order: ties resolve as in one top_k
    cand = groups(best).reshape(rows, k * group)                # in index order too
    if group >= 4 * SUBGROUP and group % SUBGROUP == 0:  # the candidates again by groups: XLA's top_k is slow on long rows
        v, j = top_k_grouped(cand, k, SUBGROUP)
    else:
        v, j = jax.lax.top_k(cand, k)
    return v, jnp.take_along_axis(best, j // group, axis=1) * group + j % group


def knn(queries, database, k):
    """Indices (m, k) of each query's k nearest database rows, nearest first.

    The order of ||q - x||^2 = ||q||^2 - 2 q.x + ||x||^2 along a query's row
    is that of -(2 q.x - ||x||^2) (||q||^2 is the same for all of it), which
    is also the more accurate expression (no cancellation against ||q||^2)."""
    g = queries @ database.T                     # the GEMM
    xx = jnp.sum(database * database, axis=1)
    rows, n = g.shape
    if n % GROUP or n // GROUP < 4 * k:
        return jax.lax.top_k(2.0 * g - xx[None, :], k)[1]
    gg, xg = g.reshape(rows, n // GROUP, GROUP), xx.reshape(n // GROUP, GROUP)

    def score(sel):  # 2 q.x - ||x||^2 of the groups sel, from the product and the norms
        if sel is None:
            return 2.0 * gg - xg[None]
        return 2.0 * jnp.take_along_axis(gg, sel[:, :, None], axis=1) - jnp.take(xg, sel, axis=0)
    return _top_k_of_groups(score, rows, k, GROUP)[1]


def knn_chunked(queries, database, k, chunk):
    """knn() a chunk of `chunk` queries at a time (lax.map): the (chunk x n)
    distance block is the largest temporary, not the (m x n) matrix
    (8192 x 1M float32 would be 32 GiB). m must be a multiple of chunk."""
    m = queries.shape[0]
    if m % chunk:
        raise ValueError(f"number of queries {m} is not a multiple of chunk={chunk}")
    idx = jax.lax.map(lambda q: knn(q, database, k), queries.reshape(m // chunk, chunk, -1))
    return idx.reshape(m, k)


# -- data and metrics -------------------------------------------------------

def make_data(n, m, d, seed=0, offset=4.0):
    """A database of n points and m queries in d dimensions: clustered
    Gaussian data shifted away from the origin by `offset`."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((32, d)) * 2.0 + offset
    db = centers[rng.integers(0, 32, n)] + rng.standard_normal((n, d))
    q = centers[rng.integers(0, 32, m)] + rng.standard_normal((m, d))
    return q.astype(np.float32), db.astype(np.float32)


def exact_knn64(queries, database, k, chunk=1024):
    """The true neighbours from float64 distances, on the default device
    (under jax.enable_x64), a chunk of queries at a time. The expansion
    |q|^2 - 2 q.x + |x|^2 in float64 keeps ~1e-13 relative accuracy, far below
    the gaps between neighbours' distances."""
    with jax.enable_x64(True):
        x = jnp.asarray(database, jnp.float64)
        xx = jnp.sum(x * x, axis=1)
        # The database goes in as an argument: closed over, it could be baked
        # into the compiled program as a (GiB-sized) constant.
        nearest = jax.jit(lambda q, x, xx: jax.lax.top_k(-(jnp.sum(q * q, axis=1)[:, None] - 2.0 * (q @ x.T)
                                                          + xx[None, :]), k)[1])
        out = [np.asarray(nearest(jnp.asarray(queries[i:i + chunk], jnp.float64), x, xx))
               for i in range(0, len(queries), chunk)]
    return np.concatenate(out)


def recall(found, true):
    """Mean over queries of |found & true| / k."""
    found, true = np.asarray(found), np.asarray(true)
    return float(np.mean([len(np.intersect1d(f, t)) / len(t) for f, t in zip(found, true)]))



def run(n=8192, m=256, d=64, k=10, scheme="bf16x6", seed=0, offset=4.0, repeats=5,
        data=None, truth=None):
    """Search with `scheme`. Returns a dict: recall (recall@k against float64),
    time_s (median search time), and "_data" / "_truth" to pass back in
    (as data= and truth=) for the next scheme."""
    q, db = data if data is not None else make_data(n, m, d, seed, offset)
    if truth is None:
        truth = exact_knn64(q, db, k)
    qj, dbj = jnp.asarray(q), jnp.asarray(db)
    search = jax.jit(jaxemu.emulate(knn, scheme=scheme), static_argnums=2)
    found = search(qj, dbj, k)
    return dict(scheme=str(scheme), recall=recall(found, truth),
                time_s=median_time(lambda: search(qj, dbj, k), repeats),
                _data=(q, db), _truth=truth)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=8192, help="database size (default 8192)")
    p.add_argument("--queries", type=int, default=256, help="number of queries (default 256)")
    p.add_argument("--d", type=int, default=64, help="dimensions (default 64)")
    p.add_argument("--k", type=int, default=10, help="neighbours per query (default 10)")
    p.add_argument("--offset", type=float, default=4.0,
                   help="shift of the data from the origin; larger = more cancellation (default 4)")
    p.add_argument("--schemes", default=DEFAULT_SCHEMES, help=f"comma list (default {DEFAULT_SCHEMES})")
    p.add_argument("--repeats", type=int, default=5, help="timed searches per scheme (default 5)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    data = make_data(args.n, args.queries, args.d, args.seed, args.offset)
    truth = exact_knn64(*data, args.k)
    print(f"kNN: database {args.n} x {args.d}, {args.queries} queries, k={args.k}, "
          f"offset={args.offset} on {jax.devices()[0].platform}")
    print(f"{'scheme':<14}{f'recall@{args.k}':>12}{'time':>11}")
    rows = []
    for s in args.schemes.split(","):
        r = run(k=args.k, scheme=s.strip(), repeats=args.repeats, data=data, truth=truth)
        rows.append(r)
        print(f"{r['scheme']:<14}{r['recall']:>12.4f}{r['time_s'] * 1e3:>9.2f}ms")
    return rows


if __name__ == "__main__":
    main()
