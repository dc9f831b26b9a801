"""Input laws and error measures shared by the tests, the accuracy report and
the benchmark (DESIGN.md 6: fresh random data, float64 reference)."""
from __future__ import annotations

from typing import Tuple

import numpy as np

LAWS = ("uniform(-1,1)", "uniform(0,1)", "normal(0,1)", "wide-exp")


def sample(law: str, shape, rng: np.random.Generator) -> np.ndarray:
    """float32 samples of one input law.

    wide-exp is u * 2^U[-16, 16) with u uniform(-1, 1): 32 binades of exponents.
    """
    if law == "uniform(-1,1)":
        x = rng.uniform(-1.0, 1.0, shape)
    elif law == "uniform(0,1)":
        x = rng.uniform(0.0, 1.0, shape)
    elif law == "normal(0,1)":
        x = rng.standard_normal(shape)
    elif law == "wide-exp":
        x = rng.uniform(-1.0, 1.0, shape) * np.exp2(rng.integers(-16, 16, shape))
    else:
        raise ValueError(f"unknown input law {law!r}; known: {LAWS}")
    return np.asarray(x, dtype=np.float32)


def operands(law: str, m: int, k: int, n: int, seed: int, batch: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pre = (batch,) if batch else ()
    return sample(law, pre + (m, k), rng), sample(law, pre + (k, n), rng)


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The float64 product of the float32 inputs."""
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


def relerr(c, ref) -> float:
    """Relative Frobenius error ||C - C64||_F / ||C64||_F."""
    c = np.asarray(c, np.float64)
    return float(np.linalg.norm(c - ref) / np.linalg.norm(ref))


def componentwise_err(c, a, b, ref) -> float:
    """Largest |C - C64| / (|A||B|) entry."""
    denom = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    err = np.abs(np.asarray(c, np.float64) - ref)
    mask = denom > 0
    return float(np.max(err[mask] / denom[mask])) if mask.any() else 0.0


def _two_product(x: np.ndarray, y: np.ndarray):
    """(p, e) with p + e = x y exactly (Dekker/Veltkamp split, float64, no
    over- or underflow)."""
    def split(v):
        t = v * 134217729.0  # 2^27 + 1
        hi = t - (t - v)
        return hi, v - hi
    p = x * y
    xh, xl = split(x)
    yh, yl = split(y)
    return p, ((xh * yh - p) + xh * yl + xl * yh) + xl * yl


def exact_dot_samples(a: np.ndarray, b: np.ndarray, idx) -> np.ndarray:
    """The entries C[i, j] (i, j = idx[0][t], idx[1][t]) of the float64
    product a b, each the exact dot product rounded once: error-free
    products summed by math.fsum. A reference for products whose own
    precision is float64 (ozaki2_f64 against DGEMM), on a sample of C."""
    import math
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    out = []
    for i, j in zip(*idx):
        p, e = _two_product(a[i, :], b[:, j])
        out.append(math.fsum(np.concatenate([p, e]).tolist()))
    return np.asarray(out)


def sampled_relerr(c, idx, exact) -> float:
    """Relative error ||C[idx] - exact|| / ||exact|| over sampled entries."""
    got = np.asarray(c, np.float64)[tuple(idx)]
    return float(np.linalg.norm(got - exact) / np.linalg.norm(exact))


def dot_general_reference(lhs: np.ndarray, rhs: np.ndarray, dimension_numbers) -> np.ndarray:
    """lax.dot_general in numpy through einsum (independent of jaxemu.dims),
    in the dtype given (float64 for references)."""
    (lc, rc), (lb, rb) = dimension_numbers
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lsub = [next(letters) for _ in range(lhs.ndim)]
    rsub = [next(letters) for _ in range(rhs.ndim)]
    for a, b in list(zip(lc, rc)) + list(zip(lb, rb)):
        rsub[b] = lsub[a]
    out = ([lsub[d] for d in lb] + [lsub[d] for d in range(lhs.ndim) if d not in lc and d not in lb]
           + [rsub[d] for d in range(rhs.ndim) if d not in rc and d not in rb])
    return np.einsum(f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}", lhs, rhs)


def median_time(fn, repeats: int = 5, min_rep_s: float = 0.0) -> float:
    """Median seconds per call of ``fn()`` (a zero-argument callable returning
    arrays) over ``repeats`` timed runs after one warm-up run (compilation).
    With ``min_rep_s`` > 0 each run makes enough back-to-back calls (at most
    1000) to last that long, so that small problems do not time the dispatch
    (calls of 5 ms or more run one per timed run); a run waits for its last
    result with ``jax.block_until_ready``."""
    import time

    import jax

    def run(calls):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = fn()
        jax.block_until_ready(out)
        return (time.perf_counter() - t0) / calls

    jax.block_until_ready(fn())
    calls = 1
    if min_rep_s > 0:
        single = run(1)
        # Calls of >= 5 ms time the GPU, not the dispatch, one at a time: several
        # in flight each hold their own output and temporaries (kNN's 8 GiB C
        # ran an H200 out of memory with three in flight).
        if single < 0.005:
            calls = max(1, min(1000, int(min_rep_s / max(single, 1e-9))))
    return float(np.median([run(calls) for _ in range(repeats)]))


def int8_split_reference(x: np.ndarray, n_slices: int, max_spread: int):
    """MixPert's split (xla.split_int8) in numpy, as defined, for tiles on
    the last axis of finite float32 ``x``: (slices (n_slices, ...) int8,
    E int32, ok bool), E and ok per tile. Exponents come from the bits
    (subnormals exact); y = x 2^(6 - E) and the slices y_{i+1} = (y_i -
    rint(y_i)) 128 are taken in float64, where every step is exact (the
    float32 formulation is exact too wherever a slice can be nonzero)."""
    x = np.asarray(x, np.float32)
    u = x.view(np.uint32) & np.uint32(0x7FFFFFFF)

    def floor_log2(v):
        v = v.astype(np.int64)
        e, m = v >> 23, v & 0x7FFFFF
        sub = np.where(m > 0, -149 + np.floor(np.log2(np.maximum(m, 1))).astype(np.int64), -151)
        return np.where(e > 0, e - 127, sub)

    amax = u.max(axis=-1)
    amin = np.where(u > 0, u, np.uint32(0xFFFFFFFF)).min(axis=-1)
    emax = floor_log2(amax)
    big_e = np.where(amax > 0, emax + 1, 0)
    spread = np.where(amax > 0, emax - floor_log2(np.where(amin == 0xFFFFFFFF, amax, amin)), 0)
    y = np.ldexp(x.astype(np.float64), (6 - big_e)[..., None])
    out = []
    for _ in range(n_slices):
        q = np.rint(y)
        out.append(q.astype(np.int8))
        y = (y - q) * 128.0
    return np.stack(out), big_e.astype(np.int32), spread <= max_spread
