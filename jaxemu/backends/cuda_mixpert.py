"""The cuda backend's MixPert levels (int8_l1 .. int8_l4): one launch of the
MixPert kernel (ffi/mixpert/) per product.

The split is the xla backend's (xla.int8_tile_stats: per-tile exponents,
int8 slices, fallback masks), computed by the split kernel (``split``:
ffi/mixpert/split.cuh, one pass over each operand, the same integers bit
for bit) in the layout the kernel reads (``pack`` makes it from XLA's
split); each tile's exponent becomes a scale factor (zero for tiles that
fall back, ``scale_factors``), and the kernel sums the
fixed-point products with exact int32 accumulation per K-tile and level
and one FP32 fold per K-tile. The tiles that fall back are the xla
backend's (the same masks), their products taken by the fallback kernel
where few fall back (kernel_fallback: ffi/mixpert/fallback.cuh), else tile
by tile in XLA (sparse_fallback) or over only the rows and columns that
hold such tiles (gathered_fallback); FP32's special-value rules are the
xla backend's (xla.int8_split_dot, xla.canonical_dot).

Scale factors: the tile pair (t, m, n) weighs 2^(e_A[m, t] + e_B[t, n] - c),
c = Int8Split.level_shift(levels - 1) (the weight of the combined levels' unit), split as
2^(e_A - c_A) 2^(e_B - c_B); the kernel multiplies the tile's integer sum
by A's factor (exact) and then B's, with one rounding. Where a tile
exponent lies outside [MIN_EXP, MAX_EXP] (a tile whose largest |value| is
below 2^-101 or at least 2^64), a factor could leave float's normal range:
such a product runs the xla backend's formulation instead (the same sum; a
conditional, visible in the jaxpr), which is rare in practice.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._int8dot import pad_axis
from ..schemes import Int8Split, get_scheme
from . import switches
from . import xla as xla_backend

TILE_K = 128       # ffi/mixpert/params.h: kTileK (K-steps per stage; K is padded to it)
SCALE_TILE = 32    # kScaleTile: the MixPert K-tile the kernel supports
SCALE_ALIGN = 4    # kScaleAlign: scale rows padded to 16 bytes
TILE_M, TILE_N = 128, 64  # ffi/mixpert/traits.cuh with two consumer warpgroups (K-splits are chosen for it)
MIN_EXP, MAX_EXP = -100, 64
FLAG_PAD = 16      # ffi/mixpert/params.h: kFlagPad (the fallback's transposed flags, lines padded)
TILES_MIN_LINES, TILES_MAX_NT = 512, 2048  # fallback_tiles' policy


def supports(s) -> bool:
    """MixPert schemes the kernel runs: levels I-IV on K-tiles of 32."""
    return isinstance(s, Int8Split) and s.ktile == SCALE_TILE


def scale_bits(s: Int8Split):
    """(c_A, c_B): the split of the combined levels' weight 2^-c between A's
    and B's factors."""
    c = s.level_shift(max(s.level))
    return c // 2, c - c // 2


def pack(a_sl, ea, oka, b_sl, eb, okb, s: Int8Split):
    """The kernel's operands from xla.int8_tile_stats' output (K a multiple
    of TILE_K): A's slices (B, M, K / 128, SA, 128) int8, B's (B, N, K / 128,
    SB, 128) int8 (B transposed: K contiguous), A's scale factors (B, K / 32,
    Mp) and B's (B, K / 32, Np) float32, rows padded to a multiple of 4."""
    bsz, m, nt, kt = a_sl[0].shape
    k = nt * kt
    if kt != SCALE_TILE or k % TILE_K:
        raise ValueError(f"mixpert pack: K-tiles of {SCALE_TILE} and K a multiple of {TILE_K} expected, "
                         f"got tiles of {kt}, K = {k}")
    return pack_slices(a_sl, b_sl) + scale_factors(ea[..., 0], oka[..., 0], eb[:, :, 0, :], okb[:, :, 0, :], s)


def pack_slices(a_sl, b_sl):
    """pack's slices alone (the inverse of unpack)."""
    bsz, m, nt, kt = a_sl[0].shape
    n = b_sl[0].shape[3]
    k = nt * kt
    a_p = jnp.stack([x.reshape(bsz, m, k // TILE_K, TILE_K) for x in a_sl], axis=3)
    b_p = jnp.stack([jnp.swapaxes(x.reshape(bsz, k, n), 1, 2).reshape(bsz, n, k // TILE_K, TILE_K)
                     for x in b_sl], axis=3)
    return a_p, b_p


def scale_factors(ea, oka, eb, okb, s: Int8Split):
    """The kernel's scale factors from the tile exponents and flags, A's
    (B, M, nt) and B's (B, nt, N): A's (B, nt, Mp) and B's (B, nt, Np)
    float32, zero for tiles that fall back, rows padded to SCALE_ALIGN."""
    ca, cb = scale_bits(s)
    sa = jnp.where(oka, xla_backend.pow2(ea - ca), 0.0)
    sb = jnp.where(okb, xla_backend.pow2(eb - cb), 0.0)
    return pad_axis(jnp.swapaxes(sa, 1, 2), 2, SCALE_ALIGN), pad_axis(sb, 2, SCALE_ALIGN)


def split(x, s: Int8Split, columns: bool):
    """The MixPert split kernel (ffi/mixpert/split.cuh), one pass over x:
    A (B, M, K) as rows, or B (B, K, N) with columns=True; K a multiple of
    TILE_K. Returns the slices in the kernel's layout (B, R, K / 128, S, 128)
    int8 (what pack makes), the tile exponents and the flags of the tiles
    that do not fall back, (B, R, K / 32) for rows and (B, K / 32, R) for
    columns: xla.int8_tile_stats' integers, exponents and masks, bit for bit."""
    bsz = x.shape[0]
    r, k = (x.shape[2], x.shape[1]) if columns else x.shape[1:]
    nt = k // SCALE_TILE
    n_sl = s.b_slices if columns else s.a_slices
    tiles = (bsz, nt, r) if columns else (bsz, r, nt)
    sl, e, ok = jax.ffi.ffi_call("jaxemu_mixpert_split", (
        jax.ShapeDtypeStruct((bsz, r, k // TILE_K, n_sl, TILE_K), jnp.int8),
        jax.ShapeDtypeStruct(tiles, jnp.int32), jax.ShapeDtypeStruct(tiles, jnp.uint8)))(
        x, columns=np.int64(columns), max_spread=np.int64(s.max_spread))
    return sl, e, ok != 0


def unpack(a_p, b_p):
    """The slices as xla.int8_tile_stats gives them, from the kernel's
    layout: A's (B, M, nt, 32) and B's (B, nt, 32, N) per slice."""
    bsz, m, ks, na, tk = a_p.shape
    n = b_p.shape[1]
    k = ks * tk
    a_sl = [a_p[:, :, :, i, :].reshape(bsz, m, k // SCALE_TILE, SCALE_TILE) for i in range(na)]
    b_sl = [jnp.swapaxes(b_p[:, :, :, j, :].reshape(bsz, n, k), 1, 2).reshape(bsz, k // SCALE_TILE, SCALE_TILE, n)
            for j in range(b_p.shape[3])]
    return a_sl, b_sl


def in_range(ea, oka, eb, okb):
    """Whether the exponent of every tile that does not fall back lies where
    the kernel's factors are normal powers of two (see the module's
    docstring)."""
    def fine(e, ok):
        return jnp.all(~ok | ((e >= MIN_EXP) & (e <= MAX_EXP)))
    return fine(ea, oka) & fine(eb, okb)


def packed_sum(a_p, b_p, scale_a, scale_b, levels: int):
    """The kernel's sum in float64 numpy, from pack's arrays: per K-tile t,
    sum_L 2^(7 (levels - 1 - L)) P_L[t] times scale_a[t, m] scale_b[t, n],
    P_L the exact integer sum of the level's slice products (the CPU twin
    of ffi/mixpert/mainloop.cuh, for tests)."""
    a_p, b_p = np.asarray(a_p, np.int64), np.asarray(b_p, np.int64)
    sa_, sb_ = np.asarray(scale_a, np.float64), np.asarray(scale_b, np.float64)
    bsz, m, ks, na, tk = a_p.shape
    n, nb = b_p.shape[1], b_p.shape[3]
    k = ks * tk
    a = a_p.transpose(0, 1, 3, 2, 4).reshape(bsz, m, na, k)
    b = b_p.transpose(0, 1, 3, 2, 4).reshape(bsz, n, nb, k)
    c = np.zeros((bsz, m, n))
    for t in range(k // SCALE_TILE):
        sl = slice(t * SCALE_TILE, (t + 1) * SCALE_TILE)
        v = np.zeros((bsz, m, n))
        for i in range(na):
            for j in range(nb):
                lvl = i + j
                if lvl < levels:
                    v += 2.0 ** (7 * (levels - 1 - lvl)) * np.einsum("bmk,bnk->bmn", a[:, :, i, sl], b[:, :, j, sl])
        c += v * sa_[:, t, :m, None] * sb_[:, t, None, :n]
    return c


def splits_for(m: int, n: int, k: int, batch: int) -> int:
    """K-splits: only where the output tiles cannot fill the GPU (the fused
    kernels' rule, cuda_fused.k_splits), each split keeping 4 stages or more."""
    from .cuda_fused import k_splits, sm_count
    tiles = -(-m // TILE_M) * -(-n // TILE_N) * batch
    return k_splits(tiles, k // TILE_K, 4, sm_count())


def consumer_warpgroups() -> int:
    """The MixPert kernel's consumer warpgroups: 0 (by shape, ffi/mixpert_dispatch.cu),
    or 2 / 3 on every shape where JAXEMU_CUDA_MIXPERT_THREE_WARPGROUPS is "0" / "1"
    (the same bits either way)."""
    if not switches.enabled("mixpert_three_warpgroups"):
        return 2
    return 3 if switches.forced("mixpert_three_warpgroups") else 0


def kernel_sum(a_p, b_p, scale_a, scale_b):
    """One MixPert kernel launch: C (B, M, N) float32, the K-splits' partials
    added in a fixed order (deterministic)."""
    bsz, m, ks = a_p.shape[:3]
    n = b_p.shape[1]
    splits = splits_for(m, n, ks * TILE_K, bsz)
    c = jax.ffi.ffi_call("jaxemu_mixpert", jax.ShapeDtypeStruct((splits, bsz, m, n), jnp.float32))(
        a_p, b_p, scale_a, scale_b, warpgroups=np.int32(consumer_warpgroups()))
    return c[0] if splits == 1 else jnp.sum(c, axis=0)


def guarded_sum(a_p, b_p, ea, oka, eb, okb, s: Int8Split):
    """The fixed-point sum on the MixPert kernel from the slices in its
    layout and the tile exponents and flags (A's (B, M, nt), B's (B, nt,
    N)); where a tile exponent is out of range, xla.int8_tile_products' sum
    of the same integers (unpack), through a conditional."""
    def kernel(_):
        return kernel_sum(a_p, b_p, *scale_factors(ea, oka, eb, okb, s))

    def reference(_):
        a_sl, b_sl = unpack(a_p, b_p)
        return xla_backend.int8_tile_products(a_sl, ea[..., None], oka[..., None], b_sl, eb[:, :, None, :],
                                              okb[:, :, None, :], s)

    return lax.cond(in_range(ea, oka, eb, okb), kernel, reference, None)


def tile_products(a_sl, ea, oka, b_sl, eb, okb, s: Int8Split):
    """xla.int8_tile_products' sum on the MixPert kernel from XLA's split
    (K a multiple of TILE_K): guarded_sum on pack's slices."""
    a_p, b_p = pack_slices(a_sl, b_sl)
    return guarded_sum(a_p, b_p, ea[..., 0], oka[..., 0], eb[:, :, 0, :], okb[:, :, 0, :], s)


def fallback_cap(rows: int) -> int:
    """How many rows of A (columns of B) the gathered fallback takes: a
    quarter, from 512 rows up (below that, gathering saves too little)."""
    return rows // 4 if rows >= 512 else 0


SPARSE_ELEMENTS = 1 << 28  # the tile-sparse fallback's largest intermediate, in float32 values (1 GiB)


def sparse_caps(lines: int, nt: int, other: int, batch: int = 1):
    """Static capacities of the tile-sparse fallback for one operand whose
    ``lines`` rows of A (or columns of B) hold nt K-tiles each, against
    ``other`` columns of B (rows of A): (per_tile, per_line, n_lines), the
    flagged lines kept per K-tile, the flagged K-tiles kept per line and the
    lines that may hold one; None where the intermediates would exceed
    SPARSE_ELEMENTS. A tile of 32 falls back with probability ~0.023 % on
    uniform data and ~0.064 % on normal data (int8_l4, max_spread 16); the
    caps are sized for 0.1 %: per K-tile ~lines / 1000 flagged lines
    (per_tile: 4-8x that, at least 16), per line ~nt / 1000 flagged
    K-tiles (per_line: 8, up to 256 at K = 1M)."""
    per_tile = max(16, 1 << max(0, (lines // 256 - 1).bit_length()))
    per_line = min(nt, max(8, min(256, nt // 128)))
    n_lines = min(lines, max(2048, lines // 4))
    while per_tile > 4 and batch * nt * per_tile * other > SPARSE_ELEMENTS:
        per_tile //= 2
    while n_lines > 16 and batch * n_lines * per_line * other > SPARSE_ELEMENTS:
        n_lines //= 2
    if batch * nt * per_tile * other > SPARSE_ELEMENTS or batch * n_lines * per_line * other > SPARSE_ELEMENTS:
        return None
    return per_tile, per_line, n_lines


def sparse_fits(bad, caps) -> jax.Array:
    """Whether the flagged tiles bad (B, lines, nt) fit sparse_caps' caps."""
    if caps is None:
        return jnp.asarray(False)
    per_tile, per_line, n_lines = caps
    return ((jnp.max(jnp.sum(bad, axis=1)) <= per_tile) & (jnp.max(jnp.sum(bad, axis=2)) <= per_line)
            & (jnp.max(jnp.sum(jnp.any(bad, axis=2), axis=1)) <= n_lines))


def first_indices(mask, size: int, fill: int):
    """Along the last axis of mask (..., n): the indices of the first
    ``size`` True entries in order, ``fill`` past them (jnp.nonzero(size=)
    per row). One scatter with unique targets: jnp.nonzero counts with a
    bincount whose atomic adds all land on a few bins, slow on the GPU
    (measured: the fallback's index lists cost ms at K = 1M)."""
    lead, n = mask.shape[:-1], mask.shape[-1]
    mask2 = mask.reshape(-1, n)
    pos = jnp.where(mask2, jnp.cumsum(mask2, axis=1, dtype=jnp.int32) - 1, size)  # size: dropped
    rows = jnp.arange(mask2.shape[0], dtype=jnp.int32)[:, None]
    src = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), mask2.shape)
    out = jnp.full((mask2.shape[0], size), fill, jnp.int32).at[rows, pos].set(src, mode="drop", unique_indices=True)
    return out.reshape(lead + (size,))


def line_fallback(bad, tiles, other, caps):
    """One batch element's fallback products of one operand's flagged tiles,
    summed per line (row of A, or column of B), computed per K-tile.

    bad (P, nt): the flagged tiles of P lines; tiles(idx) -> (nt, R, kt):
    the values of the tiles (t, idx[t, r]), zero where idx = P; other (nt,
    kt, Q): the other operand's K-tiles. Per K-tile t, its flagged lines
    (up to R = per_tile, in order) times the other operand's tile t: an
    (nt, R, Q) batch of thin FP32 products, then per flagged line the sum
    of its slots in K order (a gather and a fixed-order sum: the result is
    deterministic). Returns (lines (L,), sums (L, Q)); lines = P pads."""
    p, nt = bad.shape
    per_tile, per_line, n_lines = caps
    idx = first_indices(bad.T, per_tile, p)  # (nt, R)
    y = jnp.matmul(tiles(idx), other, precision=lax.Precision.HIGHEST)  # (nt, R, Q)
    rank = jnp.cumsum(bad, axis=0, dtype=jnp.int32) - 1  # (P, nt): a flagged tile's slot in its K-tile
    lines = first_indices(jnp.any(bad, axis=1), n_lines, p)  # (L,)
    line_bad = jnp.take(bad, lines, axis=0, mode="fill", fill_value=False)  # (L, nt)
    line_rank = jnp.take(rank, lines, axis=0, mode="fill", fill_value=0)
    t = first_indices(line_bad, per_line, nt)  # (L, per_line)
    slot = jnp.take_along_axis(line_rank, jnp.minimum(t, nt - 1), axis=1)
    flat = jnp.where(t < nt, t * per_tile + slot, nt * per_tile)  # past the end: a zero
    gathered = jnp.take(y.reshape(nt * per_tile, -1), flat, axis=0, mode="fill", fill_value=0)
    return lines, jnp.sum(gathered, axis=1)


def sparse_rows(c, a, b, bad_a, caps, kt: int):
    """c plus a_bad b tile by tile (line_fallback over A's rows): a (B, M,
    K), b (B, K, N), bad_a (B, M, nt)."""
    def one(c, a, b, bad_a):
        m, k = a.shape
        n, nt = b.shape[1], k // kt
        a3, b3 = a.reshape(m, nt, kt), b.reshape(nt, kt, n)
        ts = jnp.arange(nt)[:, None]
        rows, sums = line_fallback(bad_a, lambda i: a3.at[i, ts].get(mode="fill", fill_value=0), b3, caps)
        return c.at[rows].add(sums, mode="drop")

    return jax.vmap(one)(c, a, b, bad_a)


def good_tiles_transposed(a, bad_a, kt: int):
    """One batch element's A (M, K) with its tiles that fall back (bad_a
    (M, nt)) zeroed, as K-tiles (nt, kt, M): sparse_columns' other operand
    (a copy of A: the mask costs nothing more)."""
    m, k = a.shape
    return jnp.where(bad_a[:, :, None], 0.0, a.reshape(m, k // kt, kt)).transpose(1, 2, 0)


def sparse_columns(c, a, b, bad_a, bad_b, caps, kt: int):
    """c plus a_good b_bad tile by tile (line_fallback over B's columns):
    bad_b (B, nt, N)."""
    def one(c, a, b, bad_a, bad_b):
        k, n = b.shape
        nt = k // kt
        b3 = b.reshape(nt, kt, n)
        ts = jnp.arange(nt)[:, None]
        cols, sums = line_fallback(bad_b.T, lambda i: b3.at[ts, :, i].get(mode="fill", fill_value=0),
                                   good_tiles_transposed(a, bad_a, kt), caps)
        return c.at[:, cols].add(sums.T, mode="drop")

    return jax.vmap(one)(c, a, b, bad_a, bad_b)


def sparse_fallback(c, a, b, bad_a, bad_b, caps_a, caps_b, kt: int):
    """xla.int8_fallback's sum a_bad b + a_good b_bad, tile by tile: the
    flagged tiles of A times B's K-tiles (sparse_rows), and A's good tiles
    times the flagged tiles of B (sparse_columns), in FP32 (precision
    HIGHEST: thin products, on which an emulated scheme's tiles would waste
    most of their work; on 32 K-steps FP32's componentwise error is the
    fallback schemes' size, tests/test_mixpert_host.py). a (B, M, K), b
    (B, K, N), bad_a (B, M, nt), bad_b (B, nt, N). Each side's lines are
    added to C once (unique indices)."""
    c = sparse_rows(c, a, b, bad_a, caps_a, kt)
    return sparse_columns(c, a, b, bad_a, bad_b, caps_b, kt)


def fallback_tiles(m: int, n: int, nt: int) -> tuple[bool, bool]:
    """Whether the fallback kernel takes the rows of A, and the columns of
    B, that hold a single flagged tile K-tile by K-tile (each slab of the
    other operand read once for all of them, not once per flagged tile):
    where M and N are both at least TILES_MIN_LINES (a K-tile then has
    several such lines to share a slab that is worth sharing: 0.02-0.07 %
    of the tiles fall back on uniform and normal data) and K is at most
    TILES_MAX_NT K-tiles (most flagged lines then hold one flagged tile).
    Measured at 8192^3 (H200, stop 49): the fallback 1.74 -> 1.50 ms on
    normal data; int8_l4 11.86 -> 11.54 ms on uniform data. The fallback
    kernels alone (tests/native/kernel_check.cu, H200, stop 51, lines / tiles,
    ms): k-means distances 1M x 256 x 1024 1.54 / 0.72, 1000 x 1024 x 1000
    0.032 / 0.025, 2048^3 0.071 / 0.030; worse tile by tile with at most
    300 lines on a side (2 x 300 x 1024 x 200 0.023 / 0.030, 4 x 129 x 4096
    x 64 0.017 / 0.025: the lists' launches) and on the k-means update
    (1024 x 1M x 256, 32768 K-tiles: 0.88 / 1.95); 4096 x 65536 x 4096
    (2048 K-tiles) even, 1.43 / 1.47. $JAXEMU_CUDA_MIXPERT_FALLBACK_TILES:
    "1" both sides wherever they can, "0" never; the result is the same
    bits either way."""
    if not switches.enabled("mixpert_fallback_tiles"):
        return False, False
    if switches.forced("mixpert_fallback_tiles"):
        return True, True
    on = min(m, n) >= TILES_MIN_LINES and nt <= TILES_MAX_NT
    return on, on


def kernel_fallback(c, a, b, oka, okb):
    """c plus xla.int8_fallback's sum a_bad b + a_good b_bad on the fallback
    kernel (ffi/mixpert/fallback.cuh): per flagged tile, its FP32
    multiply-adds on the CUDA cores, a warp walking each line's flags in K
    order, or (fallback_tiles) a block per K-tile serving the lines with a
    single flagged tile; in place on c (aliased), deterministic. a (B, M,
    K), b (B, K, N), K a multiple of TILE_K; oka (B, M, nt) and okb (B, nt,
    N): the tiles in the fixed-point sum."""
    rows_tiles, columns_tiles = fallback_tiles(a.shape[1], b.shape[2], oka.shape[2])
    ok_a, ok_b = oka.astype(jnp.uint8), okb.astype(jnp.uint8)

    def padded(x):  # (B, nt, lines), lines padded to FLAG_PAD with 1 (good): the kernel's 16-byte scans
        return jnp.pad(x, ((0, 0), (0, 0), (0, -x.shape[2] % FLAG_PAD)), constant_values=1)

    unread = jnp.zeros((1,), jnp.uint8)
    bsz, m, n = c.shape
    # (the kernel's scratch: the lists of lines with several flagged tiles)
    work = jax.ShapeDtypeStruct((bsz * (m + n) + 2 if rows_tiles or columns_tiles else 1,), jnp.int32)
    out, _ = jax.ffi.ffi_call("jaxemu_mixpert_fallback", (jax.ShapeDtypeStruct(c.shape, jnp.float32), work),
                              input_output_aliases={0: 0})(
        c, a, b, ok_a, jnp.swapaxes(ok_b, 1, 2),
        padded(jnp.swapaxes(ok_a, 1, 2)) if rows_tiles else unread, padded(ok_b) if columns_tiles else unread,
        rows_tiles=np.int64(rows_tiles), columns_tiles=np.int64(columns_tiles))
    return out


def kernel_fits(bad, nt: int) -> jax.Array:
    """Whether the fallback kernel takes the flagged tiles bad (B, lines,
    nt) of one operand: at most 1/64 of them fall back, and at most
    max(64, nt / 64) in any line (one warp walks a line: a line of many
    flagged tiles would serialise). On these bounds its multiply-adds are
    at most ~3 % of the product's, where the whole products of the
    fallback scheme cost about one product more."""
    per_line = jnp.sum(bad, axis=2, dtype=jnp.int32)  # (B, lines)
    total = jnp.sum(per_line, axis=1)
    return (jnp.max(per_line) <= max(64, nt // 64)) & (jnp.max(total) <= bad.shape[1] * nt // 64)


def kernel_takes(bad_a, bad_b, nt: int) -> jax.Array:
    """kernel_fits for both operands: A's flagged tiles bad_a (B, M, nt) and
    B's bad_b (B, nt, N)."""
    return kernel_fits(bad_a, nt) & kernel_fits(jnp.swapaxes(bad_b, 1, 2), nt)


def gathered_fallback(c, a, b, oka, okb, s: Int8Split, platform: str):
    """xla.int8_fallback's sum, a_bad b + a_good b_bad, over only the
    tiles, or the rows of A and the columns of B, that hold a tile that
    falls back: on real data a small share of them (on uniform and normal
    data 0.02-0.07 % of tiles, so 5-15 % of the rows at K = 8192), where
    the whole products over masked operands cost two full products of the
    fallback scheme. Five routes (fallback_route, one switch): none; the
    fallback kernel (kernel_fallback, $JAXEMU_CUDA_MIXPERT_FALLBACK) where
    few tiles fall back; tile
    by tile in XLA (sparse_fallback, $JAXEMU_CUDA_MIXPERT_SPARSE) where few tiles
    per K-tile and per line fall back; the gathered rows and columns, up
    to fallback_cap of them (static shapes: the gathered rows are the
    nonzero rows padded with zero rows); beyond that, or where an operand
    is too small to gain, the whole products (xla.int8_fallback). Each gathered row and column of C
    is added once (unique indices: the result is deterministic).
    ``platform``'s registered product runs the fallback scheme of the
    gathered and whole routes (on the GPU: its fused kernels)."""
    from . import product_for
    bsz, m, k = a.shape
    n = b.shape[2]
    fb = get_scheme(s.fallback)
    product = product_for(platform)
    bad_a_t, bad_b_t = ~oka[..., 0], ~okb[:, :, 0, :]  # (B, M, nt), (B, nt, N): small
    rows = jnp.any(bad_a_t, axis=2)  # (B, M): rows of A with a tile that falls back
    cols = jnp.any(bad_b_t, axis=1)  # (B, N)
    bidx = jnp.arange(bsz)[:, None]
    caps_a, caps_b, cap_m, cap_n = fallback_caps(bsz, m, k, n, s)
    # (The masked operands are made inside the branches that use them: made
    # before the switch, XLA computes them on every call.)

    def none(c):
        return c

    use_kernel = platform == "cuda" and switches.enabled("mixpert_fallback")

    def kernel(c):
        return kernel_fallback(c, a, b, oka[..., 0], okb[:, :, 0, :])

    def sparse(c):  # (never taken without caps: fallback_route)
        if caps_a is None or caps_b is None:
            return c
        return sparse_fallback(c, a, b, bad_a_t, bad_b_t, caps_a, caps_b, s.ktile)

    def gathered(c):
        if cap_m:
            ridx = first_indices(rows, cap_m, m)  # (B, cap_m)
            take = lambda x: jnp.take_along_axis(x, ridx[:, :, None], axis=1, mode="fill", fill_value=0)
            bad_rows = jnp.repeat(take(bad_a_t), s.ktile, axis=2)  # (B, cap_m, K)
            a_rows = jnp.where(bad_rows, take(a), 0.0)  # a_bad's rows
            c = c.at[bidx, ridx].add(product(a_rows, b, fb), mode="drop")
        if cap_n:
            cidx = first_indices(cols, cap_n, n)  # (B, cap_n)
            take = lambda x: jnp.take_along_axis(x, cidx[:, None, :], axis=2, mode="fill", fill_value=0)
            bad_cols = jnp.repeat(take(bad_b_t), s.ktile, axis=1)  # (B, K, cap_n)
            b_cols = jnp.where(bad_cols, take(b), 0.0)  # b_bad's columns
            a_good = jnp.where(jnp.repeat(bad_a_t, s.ktile, axis=2), 0.0, a)
            c = c.at[bidx[:, :, None], jnp.arange(m)[None, :, None], cidx[:, None, :]].add(
                product(a_good, b_cols, fb), mode="drop")
        return c

    def whole(c):
        a_bad, a_good, b_bad, _, _ = xla_backend.int8_fallback_operands(a, b, oka, okb, s)
        return c + (product(a_bad, b, fb) + product(a_good, b_bad, fb))

    def switch(c):  # (route 1, the kernel, is the cond's below: fallback_route without it never gives 1)
        return lax.switch(fallback_route(bad_a_t, bad_b_t, s), (none, none, sparse, gathered, whole), c)

    if not use_kernel:
        return switch(c)
    # The kernel's test alone first: the other routes' tests (measured: 0.15
    # ms at 8192^3 in all) only where it fails. (Without flags the kernel
    # adds nothing: a scan of them.)
    return lax.cond(kernel_takes(bad_a_t, bad_b_t, k // s.ktile), kernel, switch, c)


def fallback_caps(bsz: int, m: int, k: int, n: int, s: Int8Split):
    """The fallback's static caps for a (B, M, K) x (B, K, N) product:
    sparse_caps for A's rows and for B's columns (None for both where
    $JAXEMU_CUDA_MIXPERT_SPARSE=0), and fallback_cap for each."""
    nt = k // s.ktile
    sparse = switches.enabled("mixpert_sparse")
    return (sparse_caps(m, nt, n, bsz) if sparse else None, sparse_caps(n, nt, m, bsz) if sparse else None,
            fallback_cap(m), fallback_cap(n))


def fallback_route(bad_a, bad_b, s: Int8Split, kernel: bool = False):
    """gathered_fallback's route from the flagged tiles bad_a (B, M, nt) and
    bad_b (B, nt, N): 0 none, 1 the fallback kernel, 2 tile by tile in XLA,
    3 gathered rows and columns, 4 whole products; 1 only where ``kernel``
    (the cuda platform, $JAXEMU_CUDA_MIXPERT_FALLBACK on)."""
    bsz, m, nt = bad_a.shape
    caps_a, caps_b, cap_m, cap_n = fallback_caps(bsz, m, nt * s.ktile, bad_b.shape[2], s)
    n_rows = jnp.max(jnp.sum(jnp.any(bad_a, axis=2), axis=1))
    n_cols = jnp.max(jnp.sum(jnp.any(bad_b, axis=1), axis=1))
    sparse = sparse_fits(bad_a, caps_a) & sparse_fits(jnp.swapaxes(bad_b, 1, 2), caps_b)
    gathered = (n_rows <= cap_m) & (n_cols <= cap_n)
    fits = kernel_takes(bad_a, bad_b, nt) if kernel else False
    route = jnp.where(fits, 1, jnp.where(sparse, 2, jnp.where(gathered, 3, 4)))
    return jnp.where((n_rows == 0) & (n_cols == 0), 0, route)


def split_both(a, b, s: Int8Split):
    """a (B, M, K) and b (B, K, N) with K zero-padded to TILE_K (zero tiles
    add nothing), and the split kernel's (slices, tile exponents, flags) of
    each."""
    a, b = xla_backend.pad_k(a, b, TILE_K)
    return a, b, split(a, s, columns=False), split(b, s, columns=True)


def general_sum(a, b, sa, sb, s: Int8Split):
    """Any exponent, any fallback route: guarded_sum (the MixPert kernel, or
    the xla backend's sum where an exponent is out of range) and
    gathered_fallback's routes; sa, sb: split_both's."""
    (a_p, ea, oka), (b_p, eb, okb) = sa, sb
    c = guarded_sum(a_p, b_p, ea, oka, eb, okb, s)
    return gathered_fallback(c, a, b, oka[..., None], okb[:, :, None, :], s, "cuda")


def kernels_sum(a, b, sa, sb, s: Int8Split):
    """The common case: the MixPert kernel, then the fallback kernel in
    place on its C (where kernels_take)."""
    (a_p, ea, oka), (b_p, eb, okb) = sa, sb
    c = kernel_sum(a_p, b_p, *scale_factors(ea, oka, eb, okb, s))
    return kernel_fallback(c, a, b, oka, okb)


def kernels_take(a, sa, sb, s: Int8Split):
    """Whether kernels_sum gives the product: every exponent in the
    kernel's range and the fallback's tiles within kernel_fits."""
    (_, ea, oka), (_, eb, okb) = sa, sb
    return in_range(ea, oka, eb, okb) & kernel_takes(~oka, ~okb, a.shape[2] // s.ktile)


def exponent_bound(e):
    """2^max(E) over split's tile exponents E: a bound on max |x| (E =
    floor(log2 max |x|) + 1 from the bits of |x|, ffi/mixpert/split.cuh),
    and Inf where a tile holds NaN or Inf (their bits give E = 129; a
    finite tile's E is at most 128)."""
    return jnp.ldexp(np.float32(1.0), jnp.max(e))


def mixpert_finite(a, b, s: Int8Split, amax=None):
    """MixPert on finite canonical operands a (B, M, K), b (B, K, N) (the
    special-value rules' product; mixpert_product's, where a switch is
    off): split by the split kernel (or XLA's,
    $JAXEMU_CUDA_MIXPERT_SPLIT=0), then kernels_sum where kernels_take,
    general_sum elsewhere, through one conditional."""
    if not switches.enabled("mixpert_split"):
        a, b = xla_backend.pad_k(a, b, TILE_K)
        return xla_backend.int8_split_dot(a, b, s, "cuda", tile_products=tile_products, fallback=gathered_fallback)
    a, b, sa, sb = split_both(a, b, s)
    if not switches.enabled("mixpert_fallback"):
        return general_sum(a, b, sa, sb, s)
    # One conditional around both kernels, not one around each: one host
    # round trip fewer, and C is made inside the branch that adds the
    # fallback to it in place. (Made outside, XLA copied C into the
    # conditional's result after the in-place call: 0.13 ms at 8192^3 on an
    # H200, stop 48.)
    return lax.cond(kernels_take(a, sa, sb, s), lambda: kernels_sum(a, b, sa, sb, s),
                    lambda: general_sum(a, b, sa, sb, s))


# The general branch's outputs, in elements, computed at once; larger ones
# go block by block (in_blocks). Its XLA formulations hold a few dozen
# arrays of C's size (the reference sum's per-level products, the
# fallback's masked operands and products), and a conditional's branches
# get their buffers whichever runs: at kNN's 8192 x 128 x 262144 (C 8 GiB)
# the program asked for 165 GiB on an H200 (141 GiB) and failed, with the
# kernels' branch needing ~9 (stop 50); in blocks it holds C and one
# block's temporaries. 2^27 (C 512 MiB) keeps 8192^3 (2^26) whole.
GENERAL_BLOCK_ELEMENTS = 1 << 27


def in_blocks(product, a, b, limit: int):
    """product(a, b) for a (B, M, K), b (B, K, N) float32; where C exceeds
    ``limit`` elements, computed block by block of B's columns (or of A's
    rows, where M > N), ``limit`` output elements a block or fewer (one
    column or row a block where B min(M, N) alone exceeds it), written into
    one C in a loop (lax.fori_loop: the blocks' buffers are reused, no
    stacked copy of C). The last block ends at C's edge and overlaps the
    one before it (no padding; the shared entries are written twice, the
    second time standing). Each entry of the general branch is a valid
    result of its row of A and column of B within the scheme's bound; its
    bits may depend on decisions taken over the whole block (the kernel or
    the xla backend's sum, the fallback's route, K-splits), so blocks and
    the whole product can differ in the last bits, not beyond the bound."""
    bsz, m, _ = a.shape
    n = b.shape[2]
    if bsz * m * n <= limit:
        return product(a, b)
    axis = 2 if n >= m else 1  # C's axis cut into blocks: B's columns, or A's rows
    lines = n if axis == 2 else m
    width = max(1, limit // (bsz * (m if axis == 2 else n)))
    blocks = -(-lines // width)
    width = -(-lines // blocks)  # equal blocks, the last one overlapping by less than one block

    def block(j, c):
        start = jnp.minimum(j * width, lines - width)
        if axis == 2:
            part = product(a, lax.dynamic_slice_in_dim(b, start, width, axis=2))
        else:
            part = product(lax.dynamic_slice_in_dim(a, start, width, axis=1), b)
        return lax.dynamic_update_slice_in_dim(c, part.astype(c.dtype), start, axis=axis)

    return lax.fori_loop(0, blocks, block, jnp.zeros((bsz, m, n), a.dtype))


def general_product(a, b, s: Int8Split, split=None):
    """The product of any operands (NaN/Inf, exponents out of the kernel's
    range, any fallback route): FP32's special-value rule on the maxima
    themselves, with mixpert_finite on the finite parts; where the operands
    are finite and fit, general_sum on ``split`` (split_both's, made here
    when not given)."""
    x, y, sa, sb = split if split is not None else split_both(a, b, s)
    exact = xla_backend.product_fits(jnp.max(jnp.abs(a)), jnp.max(jnp.abs(b)), a.shape[2])
    return xla_backend.fp32_special_values(lambda a0, b0: mixpert_finite(a0, b0, s), a, b, "cuda", fits=exact,
                                           plain=lambda: general_sum(x, y, sa, sb, s))


def mixpert_product(a, b, s: Int8Split):
    """The cuda backend's concrete product for MixPert levels, with the xla
    backend's special-value rules. One conditional decides everything in
    the common case: the split runs first, and its tile exponents bound max
    |A| and max |B| (exponent_bound: Inf where NaN or Inf) for
    xla.product_fits, in place of two reductions over A and B and a
    conditional of their own (0.125 ms and a host round trip at 8192^3 on
    an H200; at 2048^3 the round trip is ~20 % of the product, stop 48).
    The bound exceeds max |x| by up to 2x (more where max |x| < 1/2: a tile
    of zeros, K's padding too, has E = 0), so a product near the fits rule
    can fail it on the bound and take the general branch, which applies
    FP32's rule on the maxima themselves (fp32_special_values, their
    reductions only there) and reuses the split where it holds."""
    if a.size == 0 or b.size == 0 or not (switches.enabled("mixpert_split")
                                          and switches.enabled("mixpert_fallback")):
        return xla_backend.canonical_dot(a, b, s, "cuda", finite=mixpert_finite)
    x, y, sa, sb = split_both(a, b, s)
    fits = xla_backend.product_fits(exponent_bound(sa[1]), exponent_bound(sb[1]), a.shape[2])

    def common():
        return kernels_sum(x, y, sa, sb, s)

    def general():
        if a.shape[0] * a.shape[1] * b.shape[2] <= GENERAL_BLOCK_ELEMENTS:
            return general_product(a, b, s, (x, y, sa, sb))
        return in_blocks(lambda a_blk, b_blk: general_product(a_blk, b_blk, s), a, b, GENERAL_BLOCK_ELEMENTS)

    take = fits & kernels_take(x, sa, sb, s)
    return xla_backend.one_of(take.astype(np.int32), [general, common], (), xla_backend.product_shape(a, b))
