"""Lloyd's k-means with the point-to-center distances computed by a GEMM.

    ||x - c||^2 = ||x||^2 - 2 x.c + ||c||^2

The middle term is one (points x features) @ (features x centers) product,
and the center update is another (one-hot labels^T @ points). Both are plain
JAX below; `jax.jit(jaxemu.emulate(step, scheme=s))` runs them on the
emulated tensor-core products. The expansion cancels badly when the data sit
away from the origin, so a one-pass BF16 product mislabels points near a
boundary; an FP32-class scheme (bf16x6, fp16x3, ...) gives the FP32 answer.

What it shows: per scheme, the final inertia relative to the FP32 run's, the
share of labels that agree with the FP32 run, and the time of a whole fit;
with scikit-learn installed, the same against sklearn.cluster.KMeans (float64,
same initial centers, n_init=1).

Distance-based clustering is one of the FP32 applications that the emulation
papers speed up with tensor cores: APE (Ma et al., "Efficiently emulating
high-bitwidth computation with low-bitwidth hardware", ICS 2022) and MixPert
(LCTES 2024) evaluate their emulated SGEMM on such scientific-computing
workloads.

    python examples/kmeans.py --n 4096 --k 16 --schemes fp32,bf16,bf16x3,bf16x6,fp16x3
"""
from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jaxemu
from jaxemu.testing import median_time

DEFAULT_SCHEMES = "fp32,bf16,bf16x3,bf16x6,fp16x3,int8_l4"


# -- the algorithm: plain JAX, nothing specific to emulation ----------------

def step(x, centers):
    """One Lloyd iteration: assign every point to its nearest center, then
    move every center to the mean of its points. Returns (centers, labels)."""
    k = centers.shape[0]
    d2 = (jnp.sum(x * x, axis=1)[:, None]
          - 2.0 * (x @ centers.T)                       # the GEMM
          + jnp.sum(centers * centers, axis=1)[None, :])
    labels = jnp.argmin(d2, axis=1)
    onehot = jax.nn.one_hot(labels, k, dtype=x.dtype)
    counts = jnp.sum(onehot, axis=0)
    sums = onehot.T @ x                                  # a second GEMM
    new = jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1.0)[:, None], centers)
    return new, labels


def lloyd(x, centers, iters):
    """`iters` Lloyd iterations in one traced loop (no convergence test, so
    one jitted call runs the whole fit). Returns (centers, labels)."""
    labels = jnp.zeros((x.shape[0],), jnp.int32)
    def body(_, carry):
        c, _labels = carry
        c, lab = step(x, c)
        return c, lab.astype(jnp.int32)
    return jax.lax.fori_loop(0, iters, body, (centers, labels))


def fit(step_fn, x, centers, max_iter):
    """Iterate until no label changes (or max_iter).
    Returns (centers, labels, iterations, converged)."""
    labels = None
    for it in range(1, max_iter + 1):
        new, new_labels = step_fn(x, centers)
        if labels is not None and bool(jnp.array_equal(new_labels, labels)):
            return new, new_labels, it, True
        centers, labels = new, new_labels
    return centers, labels, max_iter, False


# -- data and metrics -------------------------------------------------------

def make_data(n, d, k, seed=0, offset=8.0, spread=2.0):
    """k Gaussian blobs that overlap a little, all shifted by `offset` (data
    away from the origin: the distance expansion then cancels). Returns the
    float32 points and k of them, chosen at random, as initial centers."""
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((k, d)) * spread + offset
    x = means[rng.integers(0, k, n)] + rng.standard_normal((n, d))
    x = x.astype(np.float32)
    c0 = x[rng.choice(n, k, replace=False)]
    return x, c0


def inertia64(x, centers, labels):
    """Sum of squared distances to the assigned centers, in float64."""
    x = np.asarray(x, np.float64)
    c = np.asarray(centers, np.float64)
    return float(np.sum((x - c[np.asarray(labels)]) ** 2))



def _fit_scheme(x, c0, scheme, max_iter):
    step_fn = jax.jit(jaxemu.emulate(step, scheme=scheme))
    centers, labels, iters, converged = fit(step_fn, x, c0, max_iter)
    return step_fn, np.asarray(centers), np.asarray(labels), iters, converged


def run(n=4096, d=32, k=16, scheme="bf16x6", max_iter=50, seed=0, offset=8.0,
        repeats=3, with_sklearn=True, data=None, reference=None):
    """Fit k-means with `scheme` and with "fp32" from the same initial centers.

    Returns a dict: inertia (float64-evaluated), inertia_fp32, inertia_rel
    (inertia / inertia_fp32 - 1), label_agreement (share of points with the
    FP32 run's label), iters, converged (no label changed in the last
    iteration), iters_fp32, time_s (median fit time); with
    scikit-learn (and with_sklearn=True) also sklearn_inertia_rel and
    sklearn_label_agreement against sklearn's float64 Lloyd.
    `data` = (x, c0) and `reference` = a previous result's "_ref" entry skip
    regenerating the data and refitting FP32.
    """
    x, c0 = data if data is not None else make_data(n, d, k, seed, offset)
    xj, c0j = jnp.asarray(x), jnp.asarray(c0)
    if reference is None:
        _, c32, l32, it32, _ = _fit_scheme(xj, c0j, "fp32", max_iter)
        reference = dict(labels=l32, inertia=inertia64(x, c32, l32), iters=it32, sk=None)
    step_fn, c, labels, iters, converged = _fit_scheme(xj, c0j, scheme, max_iter)
    inertia = inertia64(x, c, labels)
    out = dict(scheme=str(scheme), inertia=inertia, inertia_fp32=reference["inertia"],
               inertia_rel=inertia / reference["inertia"] - 1.0,
               label_agreement=float(np.mean(labels == reference["labels"])),
               iters=iters, converged=converged, iters_fp32=reference["iters"],
               time_s=median_time(lambda: fit(step_fn, xj, c0j, max_iter)[0], repeats))
    if with_sklearn:
        try:
            from sklearn.cluster import KMeans
        except ImportError:
            KMeans = None
        if KMeans is not None:
            if reference["sk"] is None:
                km = KMeans(n_clusters=len(c0), init=np.asarray(c0, np.float64), n_init=1,
                            max_iter=max_iter, tol=0.0, algorithm="lloyd").fit(np.asarray(x, np.float64))
                reference["sk"] = (km.inertia_, km.labels_)
            sk_inertia, sk_labels = reference["sk"]
            out["sklearn_inertia_rel"] = inertia / sk_inertia - 1.0
            out["sklearn_label_agreement"] = float(np.mean(labels == sk_labels))
    out["_ref"] = reference
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=4096, help="number of points (default 4096)")
    p.add_argument("--d", type=int, default=32, help="features per point (default 32)")
    p.add_argument("--k", type=int, default=16, help="clusters (default 16)")
    p.add_argument("--offset", type=float, default=8.0,
                   help="shift of the data from the origin; larger = more cancellation (default 8)")
    p.add_argument("--max-iter", type=int, default=50, help="Lloyd iterations at most (default 50)")
    p.add_argument("--schemes", default=DEFAULT_SCHEMES, help=f"comma list (default {DEFAULT_SCHEMES})")
    p.add_argument("--repeats", type=int, default=3, help="timed fits per scheme (default 3)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    data = make_data(args.n, args.d, args.k, args.seed, args.offset)
    print(f"k-means: n={args.n} d={args.d} k={args.k} offset={args.offset} on {jax.devices()[0].platform}")
    ref, rows = None, []
    for s in args.schemes.split(","):
        r = run(scheme=s.strip(), max_iter=args.max_iter, repeats=args.repeats, data=data, reference=ref)
        ref = r["_ref"]
        rows.append(r)
    has_sk = "sklearn_inertia_rel" in rows[0]
    head = f"{'scheme':<14}{'inertia-FP32 rel':>18}{'labels=FP32':>13}{'iters':>9}{'fit time':>11}"
    if has_sk:
        head += f"{'inertia-sklearn rel':>21}{'labels=sklearn':>16}"
    print(head)
    for r in rows:
        iters = f"{r['iters']}" + ("" if r["converged"] else "(no)")
        line = (f"{r['scheme']:<14}{r['inertia_rel']:>18.2e}{r['label_agreement']:>13.4f}"
                f"{iters:>9}{r['time_s'] * 1e3:>9.1f}ms")
        if has_sk:
            line += f"{r['sklearn_inertia_rel']:>21.2e}{r['sklearn_label_agreement']:>16.4f}"
        print(line)
    if not has_sk:
        print("(pip install scikit-learn to compare with sklearn.cluster.KMeans as well)")
    print("iters: Lloyd iterations until no label changed; (no): still changing at --max-iter")
    return rows


if __name__ == "__main__":
    main()
