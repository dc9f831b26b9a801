"""The xla backend: every scheme written in plain JAX.

It runs wherever JAX runs (CPU, GPU, TPU) and is the reference semantics of
the schemes: the CUDA backend is tested against it.

All functions here take canonical operands ``a: (B, M, K)``, ``b: (B, K, N)``
of dtype float32 and return the float32 product ``(B, M, N)``.

Numerics (DESIGN.md 2):
  * Splits use bit operations, ``lax.reduce_precision`` or integer rounding,
    never a f32 -> bf16 -> f32 round trip, which XLA may delete.
  * Special values: the emulation runs on the finite part of the operands
    (NaN/Inf replaced by 0); where an operand holds NaN/Inf, a cheap product
    of "pattern" matrices (x where x is NaN/Inf, else sign(x) or 0) gives
    exactly the NaN/Inf pattern that the FP32 product has, and overrides.
    So NaN and Inf appear exactly where FP32 puts them, even for tiny
    values that a slice cannot hold (Inf * 1e-30 is Inf, not NaN).
  * K-chunk promotion: partial sums of kc K-steps are added in FP32
    round-to-nearest (Hopper's tensor cores do not round to nearest).
  * Termwise: each magnitude level of slice products has its own accumulator;
    levels are added smallest first, hi*hi last.
"""
from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import _ozaki2
from .._int8dot import int8_dot_general
from ..schemes import FloatSplit, Int8Split, NativeFP32, Ozaki2, Scheme, get_scheme

f32 = jnp.float32

# Bound on the elements of the (chunks, M, N) partial-product intermediates
# that the chunked formulation materialises at once (2^27 floats = 512 MiB).
# Larger problems loop over groups of chunks.
MAX_CHUNK_ELEMENTS = 1 << 27

_MANT = {"bf16": 7, "tf32": 10, "fp16": 10}
_LOW_DTYPE = {"bf16": jnp.bfloat16, "fp16": jnp.float16, "tf32": f32}

# fp16 layout: smallest normal 2^-14, subnormal grid 2^-24, largest 65504.
FP16_MIN_NORMAL_EXP = -14
FP16_SUBNORMAL_EXP = -24
# Row scaling puts each row's largest finite |x| in [2^13, 2^14): then the hi
# slice cannot overflow (< 65504) and the lo slice, (x - hi) * 2^sb with
# |x - hi| <= 2^2, stays below 2^14 for sb <= 12.
FP16_ROW_TOP_EXP = 13


# ----------------------------------------------------------------------------
# Bit-level helpers (exact).

def _bits(x):
    return lax.bitcast_convert_type(x, jnp.uint32)


def _from_bits(u):
    return lax.bitcast_convert_type(u, f32)


def exponent(x):
    """floor(log2(|x|)) as int32 for finite nonzero x, exact for subnormals
    (read from the bits: XLA's CPU flushes subnormal arithmetic to zero).
    Returns -127 - 23 - 1 = -151 for zero."""
    u = _bits(x) & jnp.uint32(0x7FFFFFFF)
    e = (u >> 23).astype(jnp.int32)
    m = (u & jnp.uint32(0x7FFFFF)).astype(jnp.int32)
    # Subnormal: value = m * 2^-149, so floor(log2) = -149 + floor(log2(m)).
    mlog = 31 - lax.clz(m)  # floor(log2(m)) for m > 0; -1 for m == 0
    sub = jnp.where(m > 0, -149 + mlog, -151)
    return jnp.where(e > 0, e - 127, sub)


def pow2(e):
    """2^e as f32 for int32 e in [-126, 127] (exact, built from bits)."""
    return _from_bits(((e + 127).astype(jnp.uint32)) << 23)


def ldexp(x, e):
    """x * 2^e for f32 x and int32 e with |e| <= 381, in three exact power-of-two
    steps of the same sign: intermediate results cannot over- or underflow
    unless the final one does."""
    e = jnp.asarray(e, jnp.int32)
    e1 = e // 3
    e2 = (e - e1) // 2
    e3 = e - e1 - e2
    return x * pow2(e1) * pow2(e2) * pow2(e3)


def truncate_bits(x, mant_bits):
    """Round toward zero to ``mant_bits`` explicit mantissa bits (f32 exponent range)."""
    mask = np.uint32((0xFFFFFFFF << (23 - mant_bits)) & 0xFFFFFFFF)
    return _from_bits(_bits(x) & mask)


def round_bits(x, mant_bits):
    """Round to nearest (ties to even) to ``mant_bits`` explicit mantissa bits,
    f32 exponent range. Finite values that would round past FLT_MAX are
    truncated instead, so that a finite input never gives an infinite slice."""
    r = lax.reduce_precision(x, exponent_bits=8, mantissa_bits=mant_bits)
    return jnp.where(jnp.isinf(r) & ~jnp.isinf(x), truncate_bits(x, mant_bits), r)


def to_fp16_grid(x, mode: str):
    """Round f32 x (|x| < 65504 after scaling) to a value exactly representable
    in fp16, subnormals included: 'rn' to nearest even, 'rz' toward zero."""
    tiny = jnp.abs(x) < 2.0 ** FP16_MIN_NORMAL_EXP
    scaled = x * 2.0 ** -FP16_SUBNORMAL_EXP  # exact: |x| < 2^-14
    if mode == "rn":
        normal = lax.reduce_precision(x, exponent_bits=8, mantissa_bits=10)
        sub = jnp.round(scaled)  # half to even
    else:
        normal = truncate_bits(x, 10)
        sub = jnp.trunc(scaled)
    return jnp.where(tiny, sub * 2.0 ** FP16_SUBNORMAL_EXP, normal)


# ----------------------------------------------------------------------------
# Splitting.

def row_scale_exponents(x, axis):
    """Per-row power-of-two exponents e such that max finite |x * 2^e| along
    ``axis`` lies in [2^13, 2^14). 0 for rows with no finite nonzero value."""
    amax = jnp.max(jnp.where(jnp.isfinite(x), jnp.abs(x), 0.0), axis=axis, keepdims=True)
    return scale_exponents(amax)


def scale_exponents(amax):
    """``row_scale_exponents`` from the rows' largest finite |value| (int32)."""
    return jnp.where(amax > 0, FP16_ROW_TOP_EXP - exponent(amax), 0)


def finite_extremes(x, axis):
    """Along ``axis`` of x, over its finite values (NaN/Inf count as 0):
    largest |value|, smallest nonzero |value| (inf for none), sum of
    |values|; then 1.0 where x holds a NaN or +-Inf, else 0 (auto's operand
    statistics, as the cuda backend's kernels give them)."""
    fin = jnp.isfinite(x)
    ax = jnp.abs(jnp.where(fin, x, 0.0))
    return (jnp.max(ax, axis=axis, initial=0.0),
            jnp.min(jnp.where(ax > 0, ax, jnp.inf), axis=axis, initial=jnp.inf),
            jnp.sum(ax, axis=axis),
            jnp.max(jnp.where(fin, 0.0, 1.0), axis=axis, initial=0.0))


def split_float(x, s: FloatSplit, axis=None):
    """Split finite f32 ``x`` into s.slices f32 arrays holding low-precision values.

    Returns (slices, e): x * 2^e == sum_i slices[i] * 2^(-i * sb) (exactly when
    the slices hold all the bits), where e is the per-row scaling exponent
    (None when s.scaling == 'none'); ``axis`` is the contracting axis along
    which rows are scaled.
    """
    e = None
    if s.scaling == "row":
        e = row_scale_exponents(x, axis)
        x = ldexp(x, e)
    sb = s.lo_scale_bits
    out = []
    r = x
    for i in range(s.slices):
        if s.fmt == "fp16":
            mode = "rz" if (s.split == "bitcut") else "rn"
            h = to_fp16_grid(r, mode)
        elif s.split == "bitcut":
            h = truncate_bits(r, _MANT[s.fmt])
        else:
            h = round_bits(r, _MANT[s.fmt])
        out.append(h)
        r = (r - h) * (2.0 ** sb)  # exact: r - h is the low part of r
    return out, e


def reassemble(slices, s: FloatSplit, e=None):
    """Inverse of split_float (for tests): sum_i slices[i] 2^(-i sb), unscaled, in float64."""
    sb = s.lo_scale_bits
    tot = sum(np.asarray(h, np.float64) * 2.0 ** (-i * sb) for i, h in enumerate(slices))
    if e is not None:
        tot = tot * np.exp2(-np.asarray(e, np.float64))
    return tot


def split_int8(x, s: Int8Split, n_slices: int, tile_axis: int):
    """MixPert fixed-point slicing of finite ``x`` already reshaped into tiles.

    ``tile_axis`` indexes the elements within a tile (length ktile). Every tile
    shares E = exponent of its largest |value| plus one, so y = x 2^-E lies in
    (-1, 1); y = s0 2^-6 + s1 2^-13 + s2 2^-20 + residual, each s_i an integer
    in [-64, 64] obtained by round-to-nearest (exact f32 arithmetic).

    Returns (slices as int8 arrays, E (int32, keepdims), ok (bool, keepdims)):
    ok is False for tiles whose exponent spread exceeds s.max_spread.
    """
    ax = jnp.abs(x)
    amax = jnp.max(ax, axis=tile_axis, keepdims=True)
    emax = exponent(amax)
    big_e = jnp.where(amax > 0, emax + 1, 0)
    amin = jnp.min(jnp.where(ax > 0, ax, jnp.inf), axis=tile_axis, keepdims=True)
    spread = jnp.where(amax > 0, emax - exponent(jnp.where(jnp.isinf(amin), amax, amin)), 0)
    ok = spread <= s.max_spread
    y = ldexp(x, -big_e) * 64.0
    out = []
    for i in range(n_slices):
        q = jnp.round(y)
        out.append(q.astype(jnp.int8))
        y = (y - q) * 128.0
    return out, big_e, ok


# ----------------------------------------------------------------------------
# Products.

def _dot(a, b, precision, preferred=f32):
    """(B, M, K) x (B, K, N) batched product."""
    return lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))), precision=precision,
                           preferred_element_type=preferred)


def _slice_dot_precision(fmt: str, platform: str):
    """Dot precision for slices that are already exact in ``fmt``."""
    if fmt == "tf32":
        if platform in ("cuda", "rocm"):
            return lax.DotAlgorithmPreset.TF32_TF32_F32
        # Elsewhere products of tf32-exact values are exact in f32 arithmetic.
        return lax.Precision.HIGHEST
    # bf16/fp16 operands: explicit DEFAULT so a global
    # jax_default_matmul_precision setting cannot change the algorithm.
    return lax.Precision.DEFAULT


def pad_k(a, b, mult):
    """Zero-pad K (axis 2 of a, axis 1 of b; either may be None) to a multiple
    of mult. Zeros meet only zeros, so the product is unchanged."""
    k = a.shape[2] if a is not None else b.shape[1]
    pad = (-k) % mult
    if pad and a is not None:
        a = jnp.pad(a, ((0, 0), (0, 0), (0, pad)))
    if pad and b is not None:
        b = jnp.pad(b, ((0, 0), (0, pad), (0, 0)))
    return a, b


def _chunk_groups(nchunks: int, per_chunk_elems: int) -> int:
    """Largest divisor g of nchunks with g * per_chunk_elems <= MAX_CHUNK_ELEMENTS."""
    cap = max(1, MAX_CHUNK_ELEMENTS // max(1, per_chunk_elems))
    g = min(nchunks, cap)
    while nchunks % g:
        g -= 1
    return g


def chunked_sum(partial_fn, a_list, b_list, chunk: int, n_acc: int):
    """Sum over K-chunks of partial_fn(a_chunks, b_chunks, t0) -> n_acc arrays (B, g, M, N)
    reduced over the chunk axis, in FP32 round-to-nearest.

    ``a_list``: arrays (B, M, K); ``b_list``: arrays (B, K, N), K a multiple of
    ``chunk``. partial_fn receives arrays reshaped to (B, M, g, chunk) and
    (B, g, chunk, N) for a group of g chunks starting at chunk index t0 and
    returns a list of n_acc arrays of shape (B, g, M, N).
    """
    bsz, m, k = a_list[0].shape
    n = b_list[0].shape[2]
    nc = k // chunk
    a4 = [x.reshape(bsz, m, nc, chunk) for x in a_list]
    b4 = [x.reshape(bsz, nc, chunk, n) for x in b_list]
    g = _chunk_groups(nc, bsz * m * n)
    if g == nc:
        return [p.sum(axis=1) for p in partial_fn(a4, b4, 0)]

    def body(step, accs):
        t0 = step * g
        aa = [lax.dynamic_slice_in_dim(x, t0, g, axis=2) for x in a4]
        bb = [lax.dynamic_slice_in_dim(x, t0, g, axis=1) for x in b4]
        parts = partial_fn(aa, bb, t0)
        return [acc + p.sum(axis=1) for acc, p in zip(accs, parts)]

    init = [jnp.zeros((bsz, m, n), f32) for _ in range(n_acc)]
    return lax.fori_loop(0, nc // g, body, init)


def _cat(xs, axis):
    return xs[0] if len(xs) == 1 else jnp.concatenate(xs, axis=axis)


def level_products(a_sl, b_sl, levels, kc, precision, low_dtype):
    """One f32 accumulator per level: sum over (i, j) in the level of a_sl[i] @ b_sl[j].

    Each level is one product of K-concatenated slices (the terms of one level
    have the same magnitude, so they share the low-precision accumulator);
    with kc, K is cut into chunks whose partial sums are added in FP32.
    """
    a_sl = [x.astype(low_dtype) for x in a_sl]
    b_sl = [x.astype(low_dtype) for x in b_sl]
    k = a_sl[0].shape[2]
    if kc is None or kc >= k:
        return [_dot(_cat([a_sl[i] for i, _ in terms], 2), _cat([b_sl[j] for _, j in terms], 1), precision)
                for _, terms in levels]
    a_sl = [pad_k(x, None, kc)[0] for x in a_sl]
    b_sl = [pad_k(None, y, kc)[1] for y in b_sl]

    def partial_fn(a4, b4, t0):
        outs = []
        for _, terms in levels:
            aa = _cat([a4[i] for i, _ in terms], 3)  # (B, M, g, T*kc)
            bb = _cat([b4[j] for _, j in terms], 2)  # (B, g, T*kc, N)
            outs.append(lax.dot_general(aa, bb, (((3,), (2,)), ((0, 2), (0, 1))), precision=precision,
                                        preferred_element_type=f32))  # (B, g, M, N)
        return outs

    return chunked_sum(partial_fn, list(a_sl), list(b_sl), kc, len(levels))


def _combine_levels(accs, levels, sb):
    """Add level accumulators smallest first; small levels carry no NaN/Inf of
    their own (they only overflow when hi*hi does), so they are zeroed there."""
    out = None
    for acc, (lvl, _) in zip(accs, levels):
        if sb and lvl:
            acc = acc * (2.0 ** (-sb * lvl))
        if lvl:
            acc = jnp.where(jnp.isfinite(acc), acc, 0.0)
        out = acc if out is None else out + acc
    return out


def xla_level_sum(a_sl, b_sl, s: FloatSplit, platform: str):
    """The products of the slices, level by level, added smallest level first."""
    precision = _slice_dot_precision(s.fmt, platform)
    accs = level_products(a_sl, b_sl, s.levels, s.kc, precision, _LOW_DTYPE[s.fmt])
    return _combine_levels(accs, s.levels, s.lo_scale_bits)


def split_operand(x, s: FloatSplit, side: int, axis):
    """The slices of one finite canonical operand (side 0: A, split along
    ``axis`` = K) and its scaling exponents: ``split_float``, or, for an
    operand the scheme knows to be exact (FloatSplit.exact: small integers,
    exact in every slice format), the operand itself as its one slice,
    unscaled (exponents None)."""
    if s.exact[side]:
        return [x], None
    return split_float(x, s, axis=axis)


def split_operands(a, b, s: FloatSplit):
    """The slices of finite canonical operands, each with its scaling
    exponents: ((a_slices, ea), (b_slices, eb))."""
    return split_operand(a, s, 0, 2), split_operand(b, s, 1, 1)  # rows of A, columns of B: along K


def unscale(c, ea, eb):
    """C 2^-(ea + eb): the row and column scaling undone (one exact rescale;
    either may be None: that side was not scaled)."""
    if ea is None and eb is None:
        return c
    e = (0 if ea is None else ea) + (0 if eb is None else eb)  # (B, M, 1) + (B, 1, N)
    return ldexp(c, -e)


def split_product(a_split, b_split, s: FloatSplit, platform: str, level_sum=xla_level_sum):
    """The product of operands split by ``split_operands``."""
    (a_sl, ea), (b_sl, eb) = a_split, b_split
    return unscale(level_sum(a_sl, b_sl, s, platform), ea, eb)


def float_split_dot(a, b, s: FloatSplit, platform: str, level_sum=xla_level_sum):
    """FloatSplit schemes on finite canonical operands. ``level_sum`` computes
    the slice products (the CUDA backend passes its promoted GEMMs)."""
    return split_product(*split_operands(a, b, s), s, platform, level_sum)


# The same product in two steps (backends.SplitProduct): the slices stacked
# in front, (S, B, M, K) and (S, B, K, N), so that one gather takes a row's
# slices, and in their own dtype (exact: they hold values of that format;
# gathers move half the bytes). A row of A (column of B) is split on its
# own: the split of some rows, in any order, is those rows of the split.

def take_along(x, idx, axis: int, batch_axis: int = 0):
    """x's entries ``idx`` (B, r) along ``axis``, per batch element (x's axis
    ``batch_axis`` has length B). The indices must be in bounds."""
    shape = [1] * x.ndim
    shape[batch_axis], shape[axis] = idx.shape
    return jnp.take_along_axis(x, idx.reshape(shape), axis=axis, mode="promise_in_bounds")


def split_stacked(a, b, s: FloatSplit):
    return tuple((jnp.stack([x.astype(_LOW_DTYPE[s.fmt]) for x in sl]), e) for sl, e in split_operands(a, b, s))


def stacked_rows(split, idx):
    stacked, e = split  # (S, B, M, K), (B, M, 1)
    return take_along(stacked, idx, 2, 1), (None if e is None else take_along(e, idx, 1))


def stacked_cols(split, idx):
    stacked, e = split  # (S, B, K, N), (B, 1, N)
    return take_along(stacked, idx, 3, 1), (None if e is None else take_along(e, idx, 2))


def stacked_product(a_split, b_split, s: FloatSplit, platform: str):
    (a_st, ea), (b_st, eb) = a_split, b_split
    return split_product((list(a_st), ea), (list(b_st), eb), s, platform)


def int8_tile_stats(a, b, s: Int8Split):
    """Per-tile fixed-point data of canonical finite (a, b), K padded to ktile."""
    a, b = pad_k(a, b, s.ktile)
    bsz, m, k = a.shape
    n = b.shape[2]
    nt = k // s.ktile
    a_t = a.reshape(bsz, m, nt, s.ktile)
    b_t = b.reshape(bsz, nt, s.ktile, n)
    a_sl, ea, oka = split_int8(a_t, s, s.a_slices, tile_axis=3)  # ea, oka: (B, M, nt, 1)
    b_sl, eb, okb = split_int8(b_t, s, s.b_slices, tile_axis=2)  # eb, okb: (B, nt, 1, N)
    return a, b, a_sl, ea, oka, b_sl, eb, okb


def int8_tile_products(a_sl, ea, oka, b_sl, eb, okb, s: Int8Split):
    """The fixed-point part of a MixPert product, from int8_tile_stats' slices,
    exponents and masks (reference formulation: one int8 product per K-tile
    and level, exact int32 accumulation, scaling by the tile exponents in
    FP32, tiles summed in FP32 level by level, levels added smallest first);
    zero where a tile pair falls back."""
    bsz, m, nt, kt = a_sl[0].shape
    k = nt * kt
    n = b_sl[0].shape[3]
    # Back to (B, M, K) / (B, K, N) int8 so chunked_sum can re-tile them.
    a_flat = [x.reshape(bsz, m, k) for x in a_sl]
    b_flat = [x.reshape(bsz, k, n) for x in b_sl]
    ea_t = jnp.moveaxis(ea[..., 0], 2, 1)[..., None]  # (B, nt, M, 1)
    oka_t = jnp.moveaxis(oka[..., 0], 2, 1)[..., None]
    levels = s.levels

    def partial_fn(a4, b4, t0):
        g = a4[0].shape[2]
        ea_g = lax.dynamic_slice_in_dim(ea_t, t0, g, axis=1)
        eb_g = lax.dynamic_slice_in_dim(eb, t0, g, axis=1)  # (B, g, 1, N)
        ok_g = lax.dynamic_slice_in_dim(oka_t, t0, g, axis=1) & lax.dynamic_slice_in_dim(okb, t0, g, axis=1)
        outs = []
        for lvl, terms in levels:
            aa = _cat([a4[i] for i, _ in terms], 3)
            bb = _cat([b4[j] for _, j in terms], 2)
            p = int8_dot_general(aa, bb, (((3,), (2,)), ((0, 2), (0, 1))))  # exact
            scaled = ldexp(p.astype(f32), ea_g + eb_g - s.level_shift(lvl))
            outs.append(jnp.where(ok_g, scaled, 0.0))
        return outs

    accs = chunked_sum(partial_fn, a_flat, b_flat, s.ktile, len(levels))
    return _combine_levels(accs, levels, 0)


def int8_fallback_operands(a, b, oka, okb, s: Int8Split):
    """The float fallback's operands: the tiles that the fixed-point format
    cannot hold go through it as pairs (A tile bad, any B) + (A tile good,
    B tile bad), i.e. a_bad b + a_good b_bad. Returns (a_bad, a_good, b_bad,
    bad_a (B, M, nt), bad_b (B, nt, N)). The operands are finite here, so
    the masked zeros cannot meet an Inf."""
    bad_a_t, bad_b_t = ~oka[..., 0], ~okb[:, :, 0, :]
    bad_a = jnp.repeat(bad_a_t, s.ktile, axis=2)  # (B, M, K)
    bad_b = jnp.repeat(bad_b_t, s.ktile, axis=1)  # (B, K, N)
    return (jnp.where(bad_a, a, 0.0), jnp.where(bad_a, 0.0, a), jnp.where(bad_b, b, 0.0), bad_a_t, bad_b_t)


def int8_fallback(c, a, b, oka, okb, s: Int8Split, platform: str):
    """c plus the float fallback's products (int8_fallback_operands) in the
    scheme's fallback, as whole products over the masked operands; c itself
    where no tile falls back."""
    fb = get_scheme(s.fallback)

    def with_fallback(c):
        a_bad, a_good, b_bad, _, _ = int8_fallback_operands(a, b, oka, okb, s)
        return c + (finite_dot(a_bad, b, fb, platform) + finite_dot(a_good, b_bad, fb, platform))

    return lax.cond(jnp.any(~oka) | jnp.any(~okb), with_fallback, lambda c: c, c)


def int8_split_dot(a, b, s: Int8Split, platform: str, tile_products=int8_tile_products, fallback=int8_fallback):
    """MixPert int8 levels on finite canonical operands: the fixed-point
    products (``tile_products``: int8_tile_products, or a kernel computing
    the same sum, jaxemu/backends/cuda_mixpert.py), then the float fallback
    of the tiles that the fixed-point format cannot hold (``fallback``:
    int8_fallback, or the same sum computed otherwise)."""
    a, b, a_sl, ea, oka, b_sl, eb, okb = int8_tile_stats(a, b, s)
    c = tile_products(a_sl, ea, oka, b_sl, eb, okb, s)
    return fallback(c, a, b, oka, okb, s, platform)


def int8_fallback_counts(a, b, s: Int8Split):
    """How much of a product the int8 scheme hands to its float fallback.

    Returns a dict: a_tiles / a_fallback (tiles of A, and those whose exponent
    spread exceeds s.max_spread), likewise for B, and fallback_fraction, the
    share of (row, K-tile, column) triples computed by the fallback scheme.
    NaN/Inf count as zeros here: outputs they touch take the FP32 pattern.
    """
    a = jnp.where(jnp.isfinite(a), a, 0.0)
    b = jnp.where(jnp.isfinite(b), b, 0.0)
    _, _, _, _, oka, _, _, okb = int8_tile_stats(a, b, s)
    oka, okb = oka[..., 0], okb[:, :, 0, :]  # (B, M, nt), (B, nt, N)
    good = jnp.einsum("bmt,btn->", oka.astype(f32), okb.astype(f32))
    total = oka.shape[0] * oka.shape[1] * oka.shape[2] * okb.shape[2]
    return dict(a_tiles=int(oka.size), a_fallback=int(jnp.sum(~oka)),
                b_tiles=int(okb.size), b_fallback=int(jnp.sum(~okb)),
                fallback_fraction=float(1.0 - good / total) if total else 0.0)


def check_ozaki2_operands(a, s: Ozaki2):
    """Ozaki II schemes take operands of their own dtype (float64 for ozaki2_f64)."""
    if np.dtype(a.dtype) != np.dtype(s.dtype):
        raise TypeError(f"scheme {s.name!r} takes {s.dtype} operands, got {a.dtype}")


def ozaki2_dot(a, b, s: Ozaki2, amax=None):
    """Ozaki scheme II on finite canonical operands (jaxemu/_ozaki2.py): the
    number of moduli is fixed by K at trace time, the scaling by the data."""
    check_ozaki2_operands(a, s)
    return _ozaki2.ozaki2_dot(a, b, s.moduli_for(a.shape[2]), s.MAX_BITS[s.dtype], s.scaling, amax)


def native_dot(a, b, s, platform: str):
    if isinstance(s, NativeFP32):
        return _dot(a, b, lax.Precision.HIGHEST, a.dtype)  # a.dtype: float64 for ozaki2_f64's overflow path
    raise TypeError(f"not a native scheme: {s!r}")


def finite_dot(a, b, s: Scheme, platform: str, level_sum=xla_level_sum):
    """The scheme on operands known to be finite."""
    if isinstance(s, NativeFP32):
        return native_dot(a, b, s, platform)
    if isinstance(s, FloatSplit):
        return float_split_dot(a, b, s, platform, level_sum)
    if isinstance(s, Int8Split):
        return int8_split_dot(a, b, s, platform)
    if isinstance(s, Ozaki2):
        return ozaki2_dot(a, b, s)
    raise NotImplementedError(f"the xla backend has no implementation of scheme {s.name!r}")


def special_pattern(x):
    """x where x is NaN/Inf, else sign(x) (0 for zeros): the pattern product of
    these has NaN/Inf exactly where the FP32 product of the operands does
    (up to overflow of finite values, which canonical_dot takes from FP32)."""
    # The sign from the bits in integer arithmetic, not jnp.sign or a float
    # compare: XLA's CPU flushes subnormals to zero in float arithmetic (and
    # rewrites a bit test into x != 0), which made Inf * 1e-40 NaN instead of
    # FP32's Inf.
    # (float64 operands of ozaki2_f64: the same on their int64 bits.)
    wide = x.dtype == jnp.float64
    it, top = (jnp.int64, 63) if wide else (jnp.int32, 31)
    u = lax.bitcast_convert_type(x, it)
    nonzero = jnp.minimum(u & it((1 << top) - 1), 1)
    sign = 1 - 2 * ((u >> top) & 1)
    return jnp.where(jnp.isfinite(x), (sign * nonzero).astype(jnp.bfloat16), x.astype(jnp.bfloat16))


def canonical_dot(a, b, scheme: Scheme, platform: str = "cpu", level_sum=xla_level_sum, finite=None,
                  fits: bool = False):
    """The scheme's product of canonical float32 operands (B, M, K) x (B, K, N):
    the reference concrete product (see jaxemu.backends).

    ``level_sum`` computes the slice products of float schemes; the default is
    plain XLA, the CUDA backend substitutes its kernels (same splits, same
    special-value handling); ``finite`` (a, b, s, amax=None) -> c, when given,
    replaces the whole product on finite operands (the cuda backend's Ozaki II);
    ``fits``: the caller has established that a and b are finite and
    ``product_fits`` holds: no special-value conditional. Composite schemes (auto) are not concrete: they
    run above the backends (jaxemu/auto.py)."""
    s = get_scheme(scheme)
    if s.parts != (s,):
        raise TypeError(f"scheme {s.name!r} is not a concrete scheme: backends run its parts "
                        f"({', '.join(p.name for p in s.parts)}), jaxemu.auto composes them")
    if isinstance(s, NativeFP32):
        return native_dot(a, b, s, platform)  # the FP32 product has FP32 semantics
    if a.size == 0 or b.size == 0:
        return jnp.zeros(product_shape(a, b), a.dtype)
    def product(a0, b0):
        return finite(a0, b0, s) if finite is not None else finite_dot(a0, b0, s, platform, level_sum)
    if isinstance(s, Ozaki2) and not fits:
        # Ozaki II scales every row of A and column of B by its maximum: taken
        # once, before the conditional, the maxima also decide it (NaN and Inf
        # propagate through max), so that each operand is read once for both
        # (three more passes over A and B had cost 0.6 ms of 9 at 8192^3 on an
        # H100, docs/performance.md, stop 28). Same exponents, same bits.
        amax = (_ozaki2.row_maxima(a, 2), _ozaki2.row_maxima(b, 1))
        ozaki = finite if finite is not None else ozaki2_dot
        # The barrier keeps XLA from taking max |B| in a pass of its own over B
        # (it had rewritten max(max(|B|, axis 1)) as a reduction of B).
        top = lax.optimization_barrier(amax)
        fits = product_fits(jnp.max(top[0]), jnp.max(top[1]), a.shape[2])
        return fp32_special_values(product, a, b, platform, fits=fits, plain=lambda: ozaki(a, b, s, amax=amax))
    return fp32_special_values(product, a, b, platform, fits=True if fits else None)


def finite_parts(a, b):
    """The operands with NaN/Inf replaced by 0, and where they are finite."""
    fin_a, fin_b = jnp.isfinite(a), jnp.isfinite(b)
    return jnp.where(fin_a, a, 0.0), jnp.where(fin_b, b, 0.0), fin_a, fin_b


# ``fp32_special_values``' bound on max|A| max|B| K: every slice of a scheme
# is at most ~2^25 times its value (lo slices scaled up by 2^lo_scale_bits <=
# 2^14, on two operands, and a rounding), so below it no slice, product,
# partial sum or result of any scheme reaches 2^126: nothing overflows.
FITS_BOUND = 2.0 ** 100


def product_fits(amax_a, amax_b, k: int):
    """True (traced) when max|A| = amax_a and max|B| = amax_b are finite and
    bound the product away from overflow (FITS_BOUND). NaN, Inf and Inf * 0
    compare false."""
    return (amax_a * amax_b) * np.float32(k) < FITS_BOUND


def fp32_special_values(product, a, b, platform: str, fits=None, plain=None, operands=None):
    """``product(a0, b0)``, an emulated product of the finite parts a0, b0 of
    a, b (``finite_parts``), with FP32's NaN/Inf semantics: where a or b hold
    NaN/Inf, the FP32 product's NaN/Inf pattern; where the emulation
    overflowed, FP32's own value. Which entries change depends only on their
    rows of A and columns of B, so auto's hybrids apply it once to the C
    their products assemble.

    Decided before the product, from the operands: when they are finite and
    ``product_fits``, the product is the answer. (Testing C afterwards cost a
    pass over C, and a conditional that passes C through unchanged makes XLA
    copy C.) One conditional: its predicate costs a device-to-host copy on
    GPUs. A caller that knows more passes ``fits`` (traced bool) and
    ``plain`` (() -> C, run when it holds): the fused path takes max |A|,
    |B| from its split kernel and runs the GEMM on the slices it has; and
    ``operands`` (() -> (a, b)), which rebuilds the operands inside the
    special-value branch (an exact operand from its 16-bit slice: as an
    operand of the conditional its float32 form would be written whole,
    4 GiB for the k-means one-hot, whichever branch runs). ``fits=True``
    (a Python bool: the caller has established it, as auto's test does,
    jaxemu/backends' Product) skips the conditional: ``plain()``, or the
    product of a and b as they are."""
    if fits is True:
        return plain() if plain is not None else product(a, b)

    def with_specials():
        # Overflow on finite operands: a slice rounded up can overflow where
        # FP32's product does not ((2^64 - ulp)^2 with bf16 slices). Those
        # entries take FP32's own value (Inf only where FP32 overflows too).
        x, y = operands() if operands is not None else (a, b)
        a0, b0, _, _ = finite_parts(x, y)
        c = product(a0, b0)
        c = jnp.where(jnp.isfinite(c), c, native_dot(a0, b0, get_scheme("fp32"), platform))
        pat = _dot(special_pattern(x), special_pattern(y), lax.Precision.DEFAULT)
        return jnp.where(jnp.isfinite(pat), c, pat)

    if fits is None:
        # NaN and Inf propagate through max and fail product_fits: one
        # reduction per operand decides. Where it holds a and b are their own
        # finite parts: the plain branch takes them as they are (XLA had
        # written out where(isfinite(a), a, 0) whole for it).
        fits = product_fits(jnp.max(jnp.abs(a)), jnp.max(jnp.abs(b)), a.shape[2])
        plain = functools.partial(product, a, b)
    return one_of(fits.astype(np.int32), [with_specials, plain], (), product_shape(a, b))


def product_shape(a, b):
    """The shape (B, M, N) of the product of canonical a (B, M, K), b (B, K, N)."""
    return (a.shape[0], a.shape[1], b.shape[2])


def one_of(index, branches, operands, shape):
    """lax.switch(index, branches, *operands) for branches that return C of
    ``shape`` (B, M, N), each returning it in rows of ONE_OF_ROW values
    (flat where its size is not a multiple), shaped back after the switch.
    A conditional's result has one layout for all its branches; XLA on the
    GPU made it (B, M, N) with M minor (as some cuBLAS calls of another
    branch write C), and the branch that ran then transposed its C inside
    the branch and the conditional's C again after it: 0.37 ms of 6.3 at
    8192^3 on an H100 (auto's conditional, docs/performance.md, stop 27);
    as (B * M, N) too (two transposes after it at 8192^3: 5.72 against
    5.43 ms, H200, stop 40). Rows of a fixed length keep the row-major
    layout (8192^3: 5.33 ms, as flat). Not one flat vector: XLA's reduction
    over C read from the conditional's vector ran at 3.7 TB/s (kNN's group
    maxima, 2048 x 2^20 per chunk: 2.34 ms; 2.03 from rows of 1024, 2.00
    from (B * M, N); H200, stop 40, scripts/kernel_timeline.py)."""
    size = int(np.prod(shape))
    out = (-1, ONE_OF_ROW) if size % ONE_OF_ROW == 0 else (-1,)
    flat = [lambda *ops, f=f: f(*ops).reshape(out) for f in branches]
    return lax.switch(index, flat, *operands).reshape(shape)


ONE_OF_ROW = 1024  # (one_of)
