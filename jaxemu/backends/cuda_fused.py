"""The cuda backend's fused path: one kernel launch per emulated product.

XLA splits each operand in one fusion (slices stacked on a leading axis, in
the slice dtype, K contiguous, K padded to 16 bytes); one FFI call
(ffi/fused/: warp-specialized TMA + wgmma kernel) computes every slice
product of every magnitude level, promotes partial sums into FP32 every kc
K-steps per term, weights each term by its exact power of two, undoes the
fp16 row/column scaling and writes C once. The only other work on C is the
rare-path conditional: NaN/Inf in the operands (seen by the split fusion) or
a non-finite output (flagged by the kernel's epilogue) sends the product
through the same FP32 special-value rules as the xla backend.

Promotion per term: level-0 (hi*hi) products promote every kc K-steps (the
scheme's kc, rounded to whole tiles); a level-L term is ~2^-(L*p) smaller
(p = 8 bits for bf16, 11-12 for fp16/tf32), so the tensor cores' truncation
error on it is as much smaller, and it promotes every kc * 8^L K-steps:
fewer pipeline drains at the same accuracy (docs/performance.md measures it).
"""
from __future__ import annotations

import functools
import math
from typing import List, NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..schemes import FloatSplit, get_scheme
from . import xla as xla_backend

_DTYPES = {"bf16": jnp.bfloat16, "fp16": jnp.float16, "tf32": jnp.float32}
TILE_M = 128
TILE_NS = (128, 192)
# Relative speed of the two tile widths on full tiles (H200, bf16, promoted
# GEMM at 8192 x 8192 x 49152: 454 vs 492 TFLOP/s with 1x1 clusters,
# ffi/gemm_sm90.cuh): a 192-wide tile pays unless it wastes > 8 % of N.
_TILE_N_SPEED = {128: 0.92, 192: 1.0}
MAX_SPLITS = 32


def tile_k(fmt: str) -> int:
    """K-steps per tile: one 128-byte row of slices."""
    return 32 if fmt == "tf32" else 64


def k_align(fmt: str) -> int:
    """K is padded to 16-byte rows (TMA's stride rule)."""
    return 4 if fmt == "tf32" else 8


class Terms(NamedTuple):
    a: Tuple[int, ...]
    b: Tuple[int, ...]
    exp: Tuple[int, ...]
    kc_tiles: Tuple[int, ...]


def terms_of(s: FloatSplit, k: int) -> Terms:
    """The kernel's term table: slice products smallest level first (the
    order the xla backend adds levels), each weighted 2^(-sb * level), and its
    promotion interval in tiles."""
    tk = tile_k(s.fmt)
    k_tiles = max(1, -(-k // tk))
    a, b, e, kc = [], [], [], []
    for lvl, pairs in s.levels:
        if s.kc is None:
            tiles = k_tiles
        else:
            tiles = max(1, (s.kc * 8 ** lvl) // tk)
        for i, j in pairs:
            a.append(i)
            b.append(j)
            e.append(-s.lo_scale_bits * lvl)
            kc.append(min(tiles, k_tiles))
    return Terms(tuple(a), tuple(b), tuple(e), tuple(kc))


class LaunchConfig(NamedTuple):
    tile_n: int
    splits: int


def launch_config(m: int, n: int, k: int, batch: int, s: FloatSplit, sm_count: int) -> LaunchConfig:
    """Tile width and K-splits for one product (a small heuristic, no search).

    Tile width: the one with the least padded work per unit of speed.
    Splits: only when the output tiles cannot fill the GPU; then the count
    that best fills whole waves, each split keeping >= 4 chunks of work.
    """
    tile_n = min(TILE_NS, key=lambda tn: (-(-n // tn) * tn / _TILE_N_SPEED[tn], -tn))
    work = -(-m // TILE_M) * -(-n // tile_n) * batch
    if work >= sm_count:
        return LaunchConfig(tile_n, 1)
    t = terms_of(s, k)
    k_tiles = max(1, -(-k // tile_k(s.fmt)))
    chunks = sum(-(-k_tiles // c) for c in t.kc_tiles)
    best, best_cost = 1, 1.0
    for sp in range(2, min(MAX_SPLITS, chunks // 4) + 1):
        cost = math.ceil(work * sp / sm_count) / sp  # waves per unit of work, relative
        if cost < best_cost * 0.95:
            best, best_cost = sp, cost
    return LaunchConfig(tile_n, best)


@functools.lru_cache(maxsize=None)
def sm_count() -> int:
    """Multiprocessors of the first CUDA device (132 on an H100/H200 SXM)."""
    try:
        return int(getattr(jax.devices("cuda")[0], "core_count", 0)) or 132
    except RuntimeError:
        return 132


def _slices(x, s: FloatSplit, axis: int, kp: int, transpose: bool):
    """One operand's slices stacked (S, L, rows, kp) in the slice dtype."""
    sl, e = xla_backend.split_float(x, s, axis=axis)
    out = []
    for h in sl:
        if transpose:
            h = jnp.swapaxes(h, 1, 2)  # (L, K, N) -> (L, N, K)
        out.append(jnp.pad(h, ((0, 0), (0, 0), (0, kp - h.shape[2]))).astype(_DTYPES[s.fmt]))
    return jnp.stack(out), e


def fused_product(a, b, s: FloatSplit):
    """The scheme's product of canonical float32 operands (L, M, K) x (L, K, N)
    with FP32 special-value semantics, in one kernel launch."""
    s = get_scheme(s)
    bsz, m, k = a.shape
    n = b.shape[2]
    if a.size == 0 or b.size == 0:
        return jnp.zeros((bsz, m, n), jnp.float32)
    fin_a, fin_b = jnp.isfinite(a), jnp.isfinite(b)
    a0, b0 = jnp.where(fin_a, a, 0.0), jnp.where(fin_b, b, 0.0)
    kp = -(-k // k_align(s.fmt)) * k_align(s.fmt)
    a_sl, ea = _slices(a0, s, 2, kp, transpose=False)
    b_sl, eb = _slices(b0, s, 1, kp, transpose=True)
    t = terms_of(s, kp)
    cfg = launch_config(m, n, kp, bsz, s, sm_count())
    scaled_in_kernel = ea is not None and cfg.splits == 1
    if scaled_in_kernel:
        row, col = ea[:, :, 0].astype(jnp.int32), eb[:, 0, :].astype(jnp.int32)
    else:
        row = col = jnp.zeros((0,), jnp.int32)
    out_types = (jax.ShapeDtypeStruct((cfg.splits, bsz, m, n), jnp.float32),
                 jax.ShapeDtypeStruct((1,), jnp.int32))
    parts, flag = jax.ffi.ffi_call(f"jaxemu_fused_{s.fmt}", out_types)(
        a_sl, b_sl, row, col,
        term_a=np.array(t.a, np.int64), term_b=np.array(t.b, np.int64),
        term_exp=np.array(t.exp, np.int64), kc_tiles=np.array(t.kc_tiles, np.int64),
        splits=np.int64(cfg.splits), tile_n=np.int64(cfg.tile_n))
    c = parts[0]
    for i in range(1, cfg.splits):  # fixed order: reruns are bit-identical
        c = c + parts[i]
    bad = flag[0] != 0
    if ea is not None and not scaled_in_kernel:
        c = xla_backend.ldexp(c, -(ea + eb))
    if cfg.splits > 1:  # the sum of finite partials can still overflow
        bad = bad | ~jnp.all(jnp.isfinite(c))

    def with_specials(c):
        # As the xla backend: overflowed entries take FP32's own value, and
        # NaN/Inf inputs impose the FP32 product's NaN/Inf pattern.
        fp32 = xla_backend.native_dot(a0, b0, get_scheme("fp32"), "cuda")
        c = jnp.where(jnp.isfinite(c), c, fp32)
        pat = xla_backend._dot(xla_backend.special_pattern(a), xla_backend.special_pattern(b),
                               lax.Precision.DEFAULT)
        return jnp.where(jnp.isfinite(pat), c, pat)

    rare = bad | ~jnp.all(fin_a) | ~jnp.all(fin_b)
    return lax.cond(rare, with_specials, lambda c: c, c)
