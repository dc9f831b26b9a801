"""The cuda backend's fused path: one kernel launch per emulated product.

The split kernel (ffi/fused/split.cuh) writes each operand's slices (the
slices of each 128-byte K-tile of a row side by side, in the slice dtype, K
zero-padded to whole tiles: ffi/fused/params.h) reading it once, B
transposed on the way through shared memory, XLA only reducing each row to
fp16's scaling exponent (with JAXEMU_CUDA_SPLIT=0, switches.py: XLA's split
fusions write the same slices, B transposed by XLA first); one FFI call
(ffi/fused/: warp-specialized TMA + wgmma kernel) computes every slice
product of every magnitude level: each pipeline stage holds every slice of
a K-tile of A and B, every term reads its slices from it (smallest first),
terms of equal weight share a partial accumulator (bf16, tf32: all of them;
fp16: hi*hi, and its two corrections), promoted into FP32 every kc K-steps,
weighted by its exact power of two; it undoes the fp16 row/column scaling
and writes C once.

Special values: the split also returns max |x| of each operand (NaN and Inf
included). When both are finite and max|A| max|B| K < 2^100
(xla.product_fits), no slice, product, partial sum or output can overflow,
so the kernel's C is FP32's answer. Otherwise FP32's rules apply (NaN and Inf
exactly where the FP32 product has them, FP32's value where the emulation
overflowed), in one of two ways:
- on the device (``device_specials``, the default): after
  the GEMM, in its own FFI call, a fix-up kernel reads the two maxima,
  returns at once when they pass, and otherwise recomputes every value of C
  that is not finite as the FP32 dot product of the FP32 operands. (A NaN
  or Inf in a row of A or column of B makes every emulated value of that row
  or column NaN or Inf: its lo slice is NaN; an overflow is Inf.) No
  conditional: no device-to-host copy of a predicate per product. Not with
  K-splits (C is summed after the call) nor with an exact operand (its FP32
  form, which the fix-up would read, is never written: the k-means one-hot).
  kNN's search (8192 x 1M x 128, H200): 31.99 -> 30.75 ms, 2.00x FP32's
  (docs/performance.md, stop 38).
- decided on the host (there, or with JAXEMU_CUDA_DEVICE_SPECIALS=0): a
  conditional runs the product through the xla backend's FP32 special-value
  rules instead. Its predicate costs a device-to-host copy, and its C
  reached XLA's next fusion as a flat vector (xla.one_of), which XLA read
  more slowly: kNN's group maxima, 2.35 against 2.04 ms per chunk. (A
  conditional deciding after the GEMM had cost a pass over C: XLA copies C
  when a branch passes it through unchanged: kNN, 8192 x 128 x 262144, 5.6
  of 19.5 ms on an H100.)
Either way the common case reads each operand once (twice for fp16's row
scaling) and writes C once.

The FP32-operand kernel (``f32_product``, ffi/fused/kernel_f32.cuh): bf16
schemes, tf32x3 and fp16x3 on a kernel that reads the FP32 operands themselves and
splits each K-tile in shared memory (fp16x3's rows scaled first, by
exponents from one pass over each operand, or the caller's, or, opt-in,
found by the kernel from each row's first nonzero K-tile: f32_product): each operand
crosses DRAM once for the product, and the special
values are settled on the device, inside the same FFI call (a fix-up kernel
that returns at once unless the GEMM found an entry that is not finite): no
conditional, no pass over C. Its in-kernel split competes with the wgmma for
shared memory and issue slots, so it pays where the operand passes weigh
most against the GEMM: outputs of up to two waves of tiles (``f32_pays``; the
k-means update, 1024 x 1048576 x 256: 1.77x SGEMM for bf16x6 against the
slice path's 0.93x, H200, A's slices in registers); on large outputs the
slice path stays faster (8192^3: 2.12x against 1.81x).
JAXEMU_CUDA_F32_OPERANDS: "0" never, "1" wherever it can run;
JAXEMU_CUDA_F32_REGISTER_A "0": A's slices through shared memory, as B's
(switches.py).

Promotion: the term table gives each term an interval: level-0 (hi*hi)
products every kc K-steps (the scheme's kc, rounded to whole tiles); a
level-L term is ~2^-(L*p) smaller (p = 8 bits for bf16, 11-12 for
fp16/tf32), so the tensor cores' truncation error on it is as much smaller,
and it may promote every kc * 8^L K-steps. A partial shared by several
terms promotes at the least of their intervals (ffi/fused/params.h:
TermPlan); the small terms come first in each K-tile, so a partial that
starts from zero takes their truncation at their own scale.
"""
from __future__ import annotations

import functools
import math
from typing import List, NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..schemes import EXACT_MAX, FloatSplit, get_scheme
from . import b_rows_are_free, switches
from . import xla as xla_backend

_DTYPES = {"bf16": jnp.bfloat16, "fp16": jnp.float16, "tf32": jnp.float32}
TILE_M = 128
# The kernel configurations ffi/fused/generate.py instantiates: (slice
# format, slices per operand (an int, or (A's, B's) where one operand is
# exact: FloatSplit.exact), tile width, partial accumulators, (group-0
# terms, group-1 terms) or None: any term list, counts read at run time).
# (tests/test_fused_layout.py checks this table against generate.py.)
KERNELS = (
    ("bf16", 2, 128, 1, (3, 0)), ("bf16", 2, 192, 1, (3, 0)),
    ("bf16", 3, 128, 1, (6, 0)), ("bf16", 3, 128, 1, (9, 0)),
    ("tf32", 2, 128, 1, (3, 0)), ("tf32", 2, 192, 1, (3, 0)),
    ("fp16", 2, 128, 2, (1, 2)),
    ("bf16", 2, 128, 1, None), ("bf16", 3, 128, 1, None),
    ("tf32", 2, 128, 1, None), ("fp16", 2, 128, 2, None),
    ("fp16", (1, 2), 128, 2, (1, 1)), ("fp16", (2, 1), 128, 2, (1, 1)),
    ("bf16", (1, 2), 128, 1, (2, 0)), ("bf16", (2, 1), 128, 1, (2, 0)),
    ("bf16", (1, 3), 128, 1, (3, 0)), ("bf16", (3, 1), 128, 1, (3, 0)),
    ("tf32", (1, 2), 128, 1, (2, 0)), ("tf32", (2, 1), 128, 1, (2, 0)),
)
# The configurations that also have a kernel promoting hi*hi every half
# K-tile (generate.py: HALF_TILE; kc_sub): fp16 and tf32 slices with fixed
# term counts at 128-wide tiles, where short K runs (kernel_kc).
HALF_TILE_KERNELS = (
    ("tf32", 2, 128, 1, (3, 0)), ("fp16", 2, 128, 2, (1, 2)),
    ("fp16", (1, 2), 128, 2, (1, 1)), ("fp16", (2, 1), 128, 2, (1, 1)),
    ("tf32", (1, 2), 128, 1, (2, 0)), ("tf32", (2, 1), 128, 1, (2, 0)),
)
# Relative speed of the two tile widths on full tiles (H200, bf16, promoted
# GEMM at 8192 x 8192 x 49152: 454 vs 492 TFLOP/s with 1x1 clusters,
# the per-level CUTLASS kernel this one replaced): a 192-wide tile pays unless
# it wastes > 8 % of N.
_TILE_N_SPEED = {128: 0.92, 192: 1.0}
# Below this many K-steps of slice products per tile (K x terms), the
# epilogue's share of a tile's time is large: 128-wide tiles, whose epilogue
# is an asynchronous TMA store, win (ffi/fused/traits.cuh).
SHORT_K_STEPS = 16384
MAX_SPLITS = 32
# A level-L term promotes every kc * LEVEL_KC_GROWTH^L K-steps (module docstring).
LEVEL_KC_GROWTH = 8


def tile_k(fmt: str) -> int:
    """K-steps per tile: one 128-byte row of slices."""
    return 32 if fmt == "tf32" else 64


def padded_k(k: int, s: FloatSplit) -> int:
    """K rounded up to whole K-tiles of the scheme's slices (zeros past k)."""
    return -(-k // tile_k(s.fmt)) * tile_k(s.fmt)


def _weight_exponents(s: FloatSplit) -> List[int]:
    """Each product's weight 2^e (lo slices scaled by 2^-sb weigh 2^(-sb * level))."""
    return [-s.lo_scale_bits * (i + j) for i, j in s.products]


def term_weights(s: FloatSplit) -> int:
    """Distinct term weights of the scheme: the partial accumulators its
    products need."""
    return len(set(_weight_exponents(s)))


def term_groups(s: FloatSplit) -> Tuple[int, int]:
    """(terms of the largest weight, the others): the kernel's two partial
    accumulators (ffi/fused/params.h: TermPlan)."""
    weights = _weight_exponents(s)
    n0 = weights.count(max(weights))
    return n0, len(weights) - n0


def kernel_tiles(s: FloatSplit) -> Tuple[int, ...]:
    """The tile widths of the fused kernel that runs ``s``, or () when none
    does (then the xla backend runs it). A kernel compiled for the scheme's
    term counts is preferred (the catalogue's schemes; one wgmma group per
    K-tile); any other term list runs on the 128-wide kernel that reads
    its counts at run time. A stage holds every slice, so 4-slice schemes
    do not fit; more weights than partial accumulators (fp16 with three
    slices) do not either."""
    counts = (s.slices_of(0), s.slices_of(1))

    def widths(fixed):
        return tuple(sorted(tn for fmt, sl, tn, partials, terms in KERNELS
                            if fmt == s.fmt and slice_counts(sl) == counts and fixed(terms, partials)))

    weights, groups = term_weights(s), term_groups(s)
    exact = widths(lambda terms, partials: terms == groups and weights <= partials)
    return exact or widths(lambda terms, partials: terms is None and weights <= partials)


def slice_counts(slices) -> Tuple[int, int]:
    """(A's slices, B's slices) of a KERNELS entry."""
    return tuple(slices) if isinstance(slices, tuple) else (slices, slices)


class Terms(NamedTuple):
    a: Tuple[int, ...]
    b: Tuple[int, ...]
    exp: Tuple[int, ...]
    kc_tiles: Tuple[int, ...]
    kc_sub: int = 1  # hi*hi's promotions per K-tile where kc is below one (ffi/fused/params.h)


# Short K: fp16 and tf32 slices promote at half the scheme's kc where K is at
# most this (kernel_kc). Two 11-bit slices keep 22 bits of each value, so at
# short K the tensor cores' truncation of hi*hi's partial, biased on data of
# one sign, is what puts the error above SGEMM's, and a partial of half the
# K-steps truncates half as much. H200 (scripts/kc_ab.py, one process, stop
# 63; x SGEMM, worst of four laws' error / SGEMM's, kc 64 -> 32 (tf32: 32 ->
# 16)): kNN 8192 x 128 x 262144 fp16x3 2.38 / 1.19 -> 2.44 / 0.88, tf32x3
# 2.00 / 1.07 -> 1.88 / 0.90; k-means distances 2^20 x 256 x 1024 fp16x3
# 3.14 / 0.86 -> 3.02 / 0.67, tf32x3 1.89 / 0.80 -> 2.05 / 0.71. Not at long
# K: each promotion is an FP32 rounding of the total, and at 2048^3 fp16x3
# went 0.37 -> 0.40, at 8192^3 0.52 -> 0.62 (and 4.07x -> 3.52x). bf16x6
# stays below SGEMM's error at K = 128 without it (0.93) and lost 15 % with it.
SHORT_K_HALF_KC = 256
HALF_KC_FORMATS = ("fp16", "tf32")


def kernel_kc(s: FloatSplit, k: int) -> "int | None":
    """The promotion interval the kernels use for ``s`` at K = k: the
    scheme's kc, halved at short K for 11-bit slices (SHORT_K_HALF_KC)."""
    if s.kc is not None and k <= SHORT_K_HALF_KC and s.fmt in HALF_KC_FORMATS:
        return max(1, s.kc // 2)
    return s.kc


def kc_sub(kc: "int | None", tk: int) -> int:
    """How often the slice kernel promotes hi*hi's partial within one K-tile
    of ``tk`` K-steps at interval ``kc``: 2 (every half K-tile) where kc is
    below a K-tile, else 1. Half a K-tile is the shortest interval the
    kernels have: a kc below it promotes every half K-tile (ffi/fused/
    params.h: Problem::kc_sub), where a kernel for it exists
    (has_half_tile_kernel); elsewhere (bf16, a custom term list, 192-wide
    tiles, the FP32-operand kernel) every whole K-tile."""
    return 1 if kc is None or kc >= tk else 2


def has_half_tile_kernel(s: FloatSplit, tile_n: int) -> bool:
    """Whether a kernel promoting hi*hi every half K-tile runs ``s`` at this
    tile width (HALF_TILE_KERNELS)."""
    counts = (s.slices_of(0), s.slices_of(1))
    return any(fmt == s.fmt and slice_counts(sl) == counts and tn == tile_n and terms == term_groups(s)
               and term_weights(s) <= partials for fmt, sl, tn, partials, terms in HALF_TILE_KERNELS)


def terms_of(s: FloatSplit, k: int, tk: int = 0) -> Terms:
    """The kernel's term table: slice products smallest level first (the
    order the xla backend adds levels), each weighted 2^(-sb * level), and its
    promotion interval (kernel_kc) in tiles of ``tk`` K-steps (default:
    tile_k), hi*hi's within a K-tile where it is shorter (kc_sub)."""
    tk = tk or tile_k(s.fmt)
    k_tiles = max(1, -(-k // tk))
    interval = kernel_kc(s, k)
    a, b, e, kc = [], [], [], []
    for lvl, pairs in s.levels:
        if interval is None:
            tiles = k_tiles
        else:
            tiles = max(1, (interval * LEVEL_KC_GROWTH ** lvl) // tk)
        for i, j in pairs:
            a.append(i)
            b.append(j)
            e.append(-s.lo_scale_bits * lvl)
            kc.append(min(tiles, k_tiles))
    return Terms(tuple(a), tuple(b), tuple(e), tuple(kc), kc_sub(interval, tk))


class LaunchConfig(NamedTuple):
    tile_n: int
    splits: int


def launch_config(m: int, n: int, k: int, batch: int, s: FloatSplit, sm_count: int) -> LaunchConfig:
    """Tile width and K-splits for one product (a small heuristic, no search).

    Tile width: 128 for short K (see SHORT_K_STEPS), else the one whose
    persistent grid finishes first: ceil(tiles / SMs) tiles on the busiest
    SM, each costing its width over its speed. (Padded work alone ignores the
    last, partly idle wave: at 2048^3 the 192-wide tiles are 176 tiles = 2
    waves on 132 SMs, the last a third full, the 128-wide ones 256 = 2 full
    waves; for many tiles the two rules agree.)
    Splits: only when the output tiles cannot fill the GPU; then the count
    that best fills whole waves, each split keeping >= 4 K-tiles of every term
    (the kernel gives each split an equal K range: ffi/fused/scheduler.cuh).
    """
    def tiles(tn):
        return -(-m // TILE_M) * -(-n // tn) * batch

    widths = kernel_tiles(s)
    if k * len(s.products) < SHORT_K_STEPS or len(widths) == 1:
        tile_n = 128
    else:
        tile_n = min(widths, key=lambda tn: (-(-tiles(tn) // sm_count) * tn / _TILE_N_SPEED[tn], -tn))
    return LaunchConfig(tile_n, k_splits(tiles(tile_n), max(1, -(-k // tile_k(s.fmt))), 4, sm_count))


def k_splits(work: int, k_tiles: int, min_tiles: int, sm_count: int) -> int:
    """K-splits of ``work`` output tiles of ``k_tiles`` K-tiles each: only
    when they cannot fill the GPU; then the count that best fills whole
    waves, each split keeping at least ``min_tiles`` K-tiles."""
    if work >= sm_count:
        return 1
    best, best_cost = 1, 1.0
    for sp in range(2, min(MAX_SPLITS, k_tiles // min_tiles) + 1):
        cost = math.ceil(work * sp / sm_count) / sp  # waves per unit of work, relative
        if cost < best_cost * 0.95:
            best, best_cost = sp, cost
    return best


@functools.lru_cache(maxsize=None)
def sm_count() -> int:
    """Multiprocessors of the first CUDA device (132 on an H100/H200 SXM)."""
    try:
        return int(getattr(jax.devices("cuda")[0], "core_count", 0)) or 132
    except RuntimeError:
        return 132


class Gate(NamedTuple):
    """A kernel's gate (ffi/common/gate.h; docs/auto.md, "The choice on the
    device"): ``choice`` an int32 on the device (auto's data test writes
    it), ``run_if`` the choices (0..31) for which the kernel runs; where
    the choice is not among them the kernel returns before it writes."""
    choice: object
    run_if: Tuple[int, ...]

    def choice_operand(self):
        return jnp.asarray(self.choice, jnp.int32).reshape((1,))

    def run_if_bits(self) -> np.int64:
        if not self.run_if or any(not 0 <= c < 32 for c in self.run_if):
            raise ValueError(f"a gate runs for a nonempty set of choices in 0..31, got {self.run_if!r}")
        return np.int64(sum(1 << c for c in set(self.run_if)))


_SLICE_TYPE = {"bf16": 0, "fp16": 1, "tf32": 2}  # ffi/module.cc: FusedSplitImpl


def slices_kernel(x, s: FloatSplit, kp: int, transposed: bool = False, e=None, gate=None):
    """``slices_xla``'s result from the split kernel: x (L, rows, K), or
    (L, K, rows) when ``transposed`` (B, split as the rows of B^T without
    XLA transposing it). Bit for bit the same slices (tests/test_fused_layout.py
    runs the kernel's per-thread code on the CPU). ``e``: the row-scaling
    exponents (L, rows) if the caller has them (backends.row_scales), else
    computed here (one more pass over x). ``gate``: None, or (choice,
    run_if) (``Gate``): the split runs only where the choice is in run_if,
    else it leaves its slices and exponents unwritten (max |x| comes back
    0; auto's choice on the device)."""
    tk = tile_k(s.fmt)
    if transposed and b_as_rows():
        # B^T's rows to the rows kernel: B is a transposed array (x @ y.T,
        # kNN's database), so XLA cancels the two transposes and nothing is
        # copied (forced on a (K, N) B, XLA would transpose it first).
        x, transposed = jnp.swapaxes(x, 1, 2), False
    bsz = x.shape[0]
    rows = x.shape[2] if transposed else x.shape[1]
    find = s.fmt == "fp16" and s.scaling == "row" and e is None and split_finds_exps(kp, transposed)
    if s.scaling != "row":
        e = None
    elif e is None and not find:
        e = xla_backend.row_scale_exponents(x, 1 if transposed else 2).reshape(bsz, rows).astype(jnp.int32)
    out = (jax.ShapeDtypeStruct((bsz, rows, kp // tk, s.slices, tk), _DTYPES[s.fmt]),
           jax.ShapeDtypeStruct((1,), jnp.int32),
           jax.ShapeDtypeStruct((bsz, rows) if find else (1,), jnp.int32))
    operands = (x, jnp.zeros((0,), jnp.int32) if e is None else e)
    attrs = dict(slice_type=_SLICE_TYPE[s.fmt], lo_scale_bits=int(s.lo_scale_bits),
                 truncate=int(s.split == "bitcut"), transposed=int(bool(transposed)), find_exp=int(find))
    if gate is None:
        sl, amax_bits, found = jax.ffi.ffi_call("jaxemu_fused_split", out)(*operands, **attrs)
    else:
        sl, amax_bits, found = jax.ffi.ffi_call("jaxemu_fused_split_gated", out)(
            *operands, gate.choice_operand(), **attrs, run_if=gate.run_if_bits())
    return sl, found if find else e, lax.bitcast_convert_type(amax_bits[0], jnp.float32)


# Rows of up to this many values (K padded to the tile) can be split by the
# kernel that finds fp16's row exponents itself (ffi/fused/params.h:
# kSplitExpMaxK; 8 to 32 lanes of a warp hold a row in registers).
SPLIT_EXP_MAX_K = 2048


def split_finds_exps(kp: int, transposed: bool) -> bool:
    """Whether the split kernel finds fp16's row exponents itself (fp16x3,
    fp16x3_bitcut: the caller checks the format) in its one read of the
    operand (split_rows_exp_kernel, ffi/fused_dispatch.cu), instead of an
    XLA reduction over it first: rows (not transposed) of up to
    SPLIT_EXP_MAX_K values, unless JAXEMU_CUDA_SPLIT_EXPS is "0"
    (switches.py). The same exponents (xla.row_scale_exponents' rule, from
    the bits), so the same slices."""
    return switches.enabled("split_exps") and not transposed and 0 < kp <= SPLIT_EXP_MAX_K


STATS_COUNT = 8  # the row statistics of ffi/stats/params.h, with the probe
EXTREMES_COUNT = 4  # ... without it
# Rows of up to this many values for the split that also takes the
# statistics: past SPLIT_EXP_MAX_K a block of 256 threads holds a row (ffi/
# fused/params.h: kSplitExpBlockMaxK; 4 tasks of 8 values per thread). The
# plain split keeps SPLIT_EXP_MAX_K until the block form has run on a GPU.
SPLIT_STATS_MAX_K = 8192


def split_takes_stats(s: FloatSplit, m: int, k: int, n: int, batch: int = 1, probe: bool = True) -> bool:
    """Whether auto's row statistics of A can come from fp16x3's split of A
    for this product (``split_rows_with_stats``): the scheme splits A with
    fp16 row scaling and no exact operand, the product reads its operands'
    split (the slice path: ``presplit_pays``), A's rows hold at most
    SPLIT_STATS_MAX_K values (K padded to the tile), the split finds
    exponents (JAXEMU_CUDA_SPLIT_EXPS not "0"), and JAXEMU_CUDA_SPLIT_STATS
    allows it: by default only the four extremes (``probe`` False: auto's
    probe runs over B's side, auto.probe_on_b), which paid end to end on
    the H200 (k-means' distances, auto over fp16x3 1.02 against 1.08 with
    the statistics' own pass, stop 58); with the probe's four sums as well
    only where the switch is "1" (it lost end to end in stops 56-58:
    docs/auto.md)."""
    allowed = switches.forced("split_stats") if probe else switches.enabled("split_stats")
    return (allowed and switches.enabled("split") and switches.enabled("split_exps")
            and s.fmt == "fp16" and s.scaling == "row" and not any(s.exact)
            and 0 < padded_k(k, s) <= SPLIT_STATS_MAX_K and presplit_pays(s, m, k, n, batch))


def split_rows_with_stats(a, v, n: int, scheme="fp16x3"):
    """fp16x3's split of A (L, M, K) and auto's row statistics of A with the
    probe v (L, K) (cuda_stats.rows' eight: max, min nonzero and sum of |a|,
    the non-finite flag, then sum t, sum |t|, max |t|, sum |t|^(1/8) of
    t = a v), or with v None the first four alone (the probe's sums left
    out: a test that probes B's side), from one read of A (ffi:
    jaxemu_fused_split_stats), for a product with N = n: (the split as
    ``presplit_operand`` returns it, the eight or four statistics (L, M)
    each), or None where ``split_takes_stats`` refuses. The split's
    exponents are found from each row's largest finite |a| (xla.py's rule),
    the same as auto's row scales from those maxima."""
    s = get_scheme(scheme)
    bsz, m, k = a.shape
    if not split_takes_stats(s, m, k, n, bsz, probe=v is not None):
        return None
    kp = padded_k(k, s)
    tk = tile_k(s.fmt)
    count = STATS_COUNT if v is not None else EXTREMES_COUNT
    out = (jax.ShapeDtypeStruct((bsz, m, kp // tk, s.slices, tk), _DTYPES[s.fmt]),
           jax.ShapeDtypeStruct((1,), jnp.int32), jax.ShapeDtypeStruct((bsz, m), jnp.int32),
           jax.ShapeDtypeStruct((count, bsz, m), jnp.float32))
    probe = v.astype(jnp.float32) if v is not None else jnp.zeros((0,), jnp.float32)  # (0,): the extremes alone
    sl, amax_bits, e, st = jax.ffi.ffi_call("jaxemu_fused_split_stats", out)(
        a, probe, slice_type=_SLICE_TYPE[s.fmt], lo_scale_bits=int(s.lo_scale_bits),
        truncate=int(s.split == "bitcut"))
    split = (sl, e, lax.bitcast_convert_type(amax_bits[0], jnp.float32).reshape(()))
    return split, tuple(st[i] for i in range(count))


def b_as_rows() -> bool:
    """Whether the split kernel takes B as the rows of B^T (slices_kernel)."""
    return switches.enabled("split") and switches.enabled("b_rows") and (
        b_rows_are_free() or switches.forced("b_rows"))


def exact_slices(x, s: FloatSplit, kp: int, transposed: bool = False):
    """An exact operand (FloatSplit.exact) as the kernel reads it: x itself,
    converted to the slice dtype (exact: small integers), as one slice (L,
    rows, kp / TK, 1, TK); exponents of zero where the scheme scales rows (the
    kernel takes both sides' or neither); and EXACT_MAX for max |x|. One
    elementwise XLA fusion, which joins the one that makes x (a one-hot
    matrix is written once, in 16 bits)."""
    tk = tile_k(s.fmt)
    if transposed:
        x = jnp.swapaxes(x, 1, 2)
    bsz, rows, k = x.shape
    sl = jnp.pad(x.astype(_DTYPES[s.fmt]), ((0, 0), (0, 0), (0, kp - k))).reshape(bsz, rows, kp // tk, 1, tk)
    e = jnp.zeros((bsz, rows), jnp.int32) if s.scaling == "row" else None
    return sl, e, jnp.float32(EXACT_MAX)


def _slices(x, s: FloatSplit, kp: int, transposed: bool = False, exact: bool = False, e=None,
            kernel: bool = True):
    """The slices, row exponents and max |x| (``abs_max``) of x (L, rows, K)
    (or, ``transposed``, (L, K, rows)) as the kernel reads them: the split
    kernel's (the default; ``e``: the row exponents if known) or, with
    JAXEMU_CUDA_SPLIT=0 or ``kernel`` False (no CUDA platform), XLA's (the
    same bits); an ``exact`` operand's ``exact_slices``."""
    if exact:
        return exact_slices(x, s, kp, transposed)
    if kernel and switches.enabled("split"):
        return slices_kernel(x, s, kp, transposed, e)
    return slices_xla(jnp.swapaxes(x, 1, 2) if transposed else x, s, kp) + (abs_max(x),)


def abs_max(x):
    """max |x| as a float32 scalar, NaN if x holds a NaN, else Inf if it holds
    an Inf: the largest of the sign-cleared bit patterns, as the split kernel
    computes it (SplitProblem::amax_bits)."""
    bits = jnp.max(lax.bitcast_convert_type(x, jnp.int32) & 0x7FFFFFFF) if x.size else jnp.int32(0)
    return lax.bitcast_convert_type(bits, jnp.float32)


def slices_xla(x, s: FloatSplit, kp: int):
    """Slices of x (L, rows, K), K contiguous, as the kernel reads them:
    (L, rows, kp / TK, S, TK) in the slice dtype (params.h), and the per-row
    scaling exponents (L, rows) or None. One elementwise fusion: each output
    element recomputes its slice from one input element, the S slices of a
    K-tile lie side by side, so the input is read once."""
    tk = tile_k(s.fmt)
    bsz, rows, k = x.shape
    x = jnp.pad(x, ((0, 0), (0, 0), (0, kp - k))).reshape(bsz, rows, kp // tk, 1, tk)
    sl, e = xla_backend.split_float(x, s, axis=(2, 4))
    which = lax.broadcasted_iota(jnp.int32, (1, 1, 1, s.slices, 1), 3)
    dt = _DTYPES[s.fmt]
    out = sl[-1].astype(dt)  # (converted before the select: XLA then keeps one fusion)
    for i in range(s.slices - 2, -1, -1):
        out = jnp.where(which == i, sl[i].astype(dt), out)
    e = None if e is None else e.reshape(bsz, rows).astype(jnp.int32)
    return out, e


def split_operands(a, b, s: FloatSplit, scales=None, presplit=(None, None)):
    """The slices of (L, M, K) and (L, K, N) as the kernel reads them, with
    their scaling exponents and max |x| (``_slices``; B as the rows of B^T): a row of A
    (column of B) is split on its own, so the slices of some of its rows, in
    any order, are those rows (axis 1) of its slices. ``scales``: the row
    exponents (ea, eb) if the caller has them (backends.row_scales);
    ``presplit``: an operand's split made ahead of the product (``presplit_operand``),
    or None."""
    kp = padded_k(a.shape[2], s)
    ea, eb = scales if scales is not None else (None, None)
    pa, pb = (_from_presplit(p) for p in presplit)
    return (pa or _slices(a, s, kp, exact=s.exact[0], e=ea),
            pb or _slices(b, s, kp, transposed=True, exact=s.exact[1], e=eb))  # B as (L, N, K)


# -- an operand split ahead of its product --------------------------------
# A loop-invariant operand (kNN's database, k-means' points: the consts of a
# scan) is split once, outside the loop (jaxemu/hoist.py binds the split,
# jaxemu/primitive.py carries it to the product): XLA on the GPU hoists no
# custom call out of a while loop, so the split kernel would run in every
# iteration (kNN: 4 x 0.29 ms per search, docs/performance.md stop 38).

def presplit_pays(s, m: int, k: int, n: int, batch: int = 1) -> bool:
    """Whether the product (L, M, K) x (L, K, N) of scheme ``s`` reads its
    operands' split from the slice path (``split_operands``), so that a split
    made ahead of it is used: a multi-slice float scheme that a kernel holds,
    no exact operand, not the FP32-operand kernel."""
    return (isinstance(s, FloatSplit) and s.slices > 1 and not any(s.exact) and bool(kernel_tiles(s))
            and not f32_kernel(s, m, k, n, batch))


def presplit_shapes(s: FloatSplit, batch: int, rows: int, k: int):
    """The (slices, row exponents, max |x|) of an operand with ``rows`` rows
    of A (columns of B) as ``presplit_operand`` returns them: the exponents
    are (0,) where the scheme does not scale rows."""
    tk = tile_k(s.fmt)
    return (jax.ShapeDtypeStruct((batch, rows, -(-k // tk), s.slices, tk), _DTYPES[s.fmt]),
            jax.ShapeDtypeStruct((batch, rows) if s.scaling == "row" else (0,), jnp.int32),
            jax.ShapeDtypeStruct((), jnp.float32))


def presplit_operand(x, s: FloatSplit, side: str, kernels: bool):
    """The split of one canonical operand as ``split_operands`` makes it: x
    (L, M, K) for side "lhs", (L, K, N) for "rhs"; ``kernels``: the split
    kernel may run (the cuda platform), else XLA's split (the same bits)."""
    k = x.shape[2] if side == "lhs" else x.shape[1]
    kp = padded_k(k, s)
    sl, e, amax = _slices(x, s, kp, transposed=side == "rhs", kernel=kernels)
    return sl, (jnp.zeros((0,), jnp.int32) if e is None else e), jnp.asarray(amax, jnp.float32).reshape(())


def _from_presplit(p):
    """presplit_operand's triple as ``_slices`` returns it (exponents None
    where the scheme does not scale rows), or None."""
    if p is None:
        return None
    sl, e, amax = p
    return sl, (None if e.shape == (0,) else e), amax


def split_rows(split, idx):
    """The slices and exponents of rows ``idx`` (L, r) (axis 1), in that
    order; max |x| of all rows (a bound for these)."""
    sl, e, amax = split
    take = functools.partial(xla_backend.take_along, idx=idx, axis=1)
    return take(sl), (None if e is None else take(e)), amax


def split_product(a_split, b_split, s: FloatSplit, specials=None, gate=None, c_in=None):
    """The kernel's product of operands split by ``split_operands``.
    ``specials``: None, special values are the caller's (decided before the
    GEMM, ``fused_product``); or the FP32 operands (a (L, M, K), b, rows):
    b (L, K, N), or B^T (L, N, K) when rows, for the fix-up on the device
    (``device_specials``; the launch must have no K-splits), which reads the
    splits' max |A| and max |B|. ``gate`` (``Gate``): the GEMM and its
    fix-up run only for the gate's choices; ``c_in``: C (L, M, N) as the
    candidates gated before this one left it, which C keeps where this
    gate is closed (aliased: no copy), or None for the first candidate. A
    gated product writes C whole in the kernel: no K-splits, its row scaling
    undone in the kernel (else ValueError)."""
    (a_sl, ea, a_max), (b_sl, eb, b_max) = a_split, b_split
    bsz, m, kp = a_sl.shape[0], a_sl.shape[1], a_sl.shape[2] * a_sl.shape[4]
    n = b_sl.shape[1]
    t = terms_of(s, kp)
    cfg = launch_config(m, n, kp, bsz, s, sm_count())
    if t.kc_sub > 1 and not has_half_tile_kernel(s, cfg.tile_n):
        t = t._replace(kc_sub=1)  # (kc_sub: whole K-tiles where no kernel promotes within one)
    scaled_in_kernel = ea is not None and cfg.splits == 1
    if scaled_in_kernel:
        row, col = ea, eb
    else:
        row = col = jnp.zeros((0,), jnp.int32)
    empty = jnp.zeros((0,), jnp.float32)
    if specials is None:
        a32 = b32 = amax = empty
        rows = False
    else:
        if cfg.splits != 1:
            raise ValueError("split_product: special values on the device need a launch without K-splits")
        a32, b32, rows = specials
        amax = jnp.stack([jnp.asarray(a_max, jnp.float32), jnp.asarray(b_max, jnp.float32)])
    out_type = jax.ShapeDtypeStruct((cfg.splits, bsz, m, n), jnp.float32)
    attrs = dict(term_a=np.array(t.a, np.int64), term_b=np.array(t.b, np.int64),
                 term_exp=np.array(t.exp, np.int64), kc_tiles=np.array(t.kc_tiles, np.int64),
                 kc_sub=np.int64(t.kc_sub), splits=np.int64(cfg.splits), tile_n=np.int64(cfg.tile_n),
                 b32_rows=np.int64(bool(rows)))
    if gate is not None:
        if cfg.splits != 1:  # (then the row scaling is undone in the kernel too)
            raise ValueError(f"split_product: a gated product writes C whole in the kernel; this launch has "
                             f"{cfg.splits} K-splits")
        keep = empty if c_in is None else c_in.reshape(out_type.shape)
        return jax.ffi.ffi_call(f"jaxemu_fused_{s.fmt}_gated", out_type,
                                input_output_aliases=None if c_in is None else {8: 0})(
            a_sl, b_sl, row, col, a32, b32, amax, gate.choice_operand(), keep,
            **attrs, run_if=gate.run_if_bits())[0]
    parts = jax.ffi.ffi_call(f"jaxemu_fused_{s.fmt}", out_type)(a_sl, b_sl, row, col, a32, b32, amax, **attrs)
    c = parts[0]
    for i in range(1, cfg.splits):  # fixed order: reruns are bit-identical
        c = c + parts[i]
    if ea is not None and not scaled_in_kernel:
        c = xla_backend.ldexp(c, -(ea[:, :, None] + eb[:, None, :]))
    return c


def fused_product(a, b, s: FloatSplit, scales=None, fits: bool = False, presplit=(None, None)):
    """The scheme's product of canonical float32 operands (L, M, K) x (L, K, N)
    with FP32 special-value semantics, in one kernel launch (module docstring);
    ``scales``: the operands' row exponents if known (backends.row_scales);
    ``fits``: the caller knows a and b finite and xla.product_fits true (the
    Product protocol, jaxemu/backends): no special-value conditional;
    ``presplit``: (A's, B's) split made ahead (``presplit_operand``) or None."""
    s = get_scheme(s)
    bsz, m, k = a.shape
    n = b.shape[2]
    if a.size == 0 or b.size == 0:
        return jnp.zeros((bsz, m, n), jnp.float32)
    if f32_kernel(s, m, k, n, bsz):  # the operands split in the kernel, special values on the device
        return f32_product(a, b, s, scales)
    a_split, b_split = split_operands(a, b, s, scales, presplit)
    if not fits and device_specials(s, m, k, n, bsz):  # FP32's rules in the GEMM's call, no conditional
        rows = b_as_rows()
        return split_product(a_split, b_split, s, specials=(a, jnp.swapaxes(b, 1, 2) if rows else b, rows))

    def operands():  # in the special-value branch: an exact operand rebuilt from its slice
        return (exact_operand(a_split[0], k) if s.exact[0] else a,
                exact_operand(b_split[0], k, transposed=True) if s.exact[1] else b)
    return xla_backend.fp32_special_values(
        lambda a0, b0: split_product(*split_operands(a0, b0, s), s), a, b, "cuda",
        fits=True if fits else xla_backend.product_fits(a_split[2], b_split[2], k),
        plain=lambda: split_product(a_split, b_split, s),
        operands=operands)


def device_specials(s: FloatSplit, m: int, k: int, n: int, batch: int = 1) -> bool:
    """Whether the slice path settles special values on the device (module
    docstring): a launch without K-splits, no exact operand (its FP32 form,
    which the fix-up would read, is never written: the k-means one-hot),
    JAXEMU_CUDA_DEVICE_SPECIALS not "0"."""
    if not switches.enabled("device_specials") or any(s.exact):
        return False
    kp = padded_k(k, s)
    return launch_config(m, n, kp, batch, s, sm_count()).splits == 1


# The kernels that read FP32 operands and split them in shared memory
# (ffi/fused/kernel_f32.cuh; ffi/fused/generate.py's F32_CONFIGS, which
# tests/test_fused_layout.py checks this against): (slice format, A's
# slices, B's slices, terms), 128 x 128 tiles of 32 K-steps; bf16 and tf32
# slices unscaled with one term weight, fp16 slices with the row scaling and
# two (fp16x3; A's slices in shared memory only, as tf32x3's).
F32_KERNELS = (("bf16", 2, 2, 3), ("bf16", 3, 3, 6), ("bf16", 3, 3, 9), ("bf16", 1, 2, 2), ("bf16", 2, 1, 2),
               ("bf16", 1, 3, 3), ("bf16", 3, 1, 3), ("fp16", 2, 2, 3), ("fp16", 1, 2, 2), ("fp16", 2, 1, 2),
               ("tf32", 2, 2, 3), ("tf32", 1, 2, 2), ("tf32", 2, 1, 2))
F32_TILE_K = 32
# fp16x3's exponents found in the FP32-operand kernel (switches:
# f32_scales_in_kernel): binades below the pass's rule, so that a row's later
# values up to ~2^(3 + 8) times the maximum of its first nonzero K-tile still
# fit fp16 (ffi/fused/transform.cuh: choose_rows); past that, the product is
# redone with the pass's exponents (f32_product). Small values reach fp16's
# subnormals 8 binades sooner than under the pass's scaling: an element's
# error stays below ~2^-41 of the first tile's maximum (the lo slice's
# subnormal spacing, 2^-24 at scale 2^-12, against a maximum near 2^5), far
# below FP32's 2^-24 of the row's largest value. H200,
# 1024 x 2^20 x 256 (kernel_check, stop 53): 4 left B's values spread over
# 33 binades (":wide") past the headroom, 8 held them with the pass's error.
F32_EXP_HEADROOM = 8
# By default (JAXEMU_CUDA_F32_SCALES_IN_KERNEL unset) the kernel finds
# fp16x3's exponents only where the passes it replaces read at least this
# many bytes ((M + N) K L 4: f32_scales_in_kernel). Measured at one size,
# the k-means update (1024 x 2^20 x 256, 5 GiB; H200, stops 53-54): the
# passes cost 1.24 ms; the kernel that finds the exponents took 0.1-0.4 ms
# more than the one given them, and the redo's predicate is a device-to-host
# copy (~30-60 us, docs/auto.md). Scaled down, at 1 GiB the passes' ~0.25
# ms still exceed both; at 256 MiB they would not, so smaller products keep
# the passes (an estimate from that one point, not a measurement below it).
F32_SCALES_IN_KERNEL_MIN_BYTES = 1 << 30


# Outputs of at most this many waves of the kernel's 128 x 128 tiles take
# the FP32-operand kernel (f32_pays). H200, x SGEMM, bf16x6, slice path /
# FP32-operand kernel with A's slices in registers (stop 34,
# docs/performance.md; in one process): 16 tiles (the k-means update, 1024 x
# 1048576 x 256) 0.93 / 1.77; 256 tiles (2048^3, 1.94 waves) 1.62 / 1.87;
# 4096 (8192^3) 2.12 / 1.81; 65536 (k-means distances) 1.93 / 1.75. Stop 33,
# A's slices in shared memory, which the register form beats by 1.14-1.15x
# on bf16x6: 64 tiles (1024^3) 0.56 / 1.01; 400 (2560^3) 1.62 / 1.40; 1024
# (4096^3) 2.03 / 1.68.
F32_MAX_WAVES = 2


def f32_kernel(s: FloatSplit, m: int, k: int, n: int, batch: int = 1) -> bool:
    """Whether ``s`` runs on the FP32-operand kernel for this product:
    slices rounded to nearest, bf16 or tf32 unscaled with one term weight or fp16
    with the row scaling and two (fp16x3), a kernel built for its slice and
    term counts, K and N multiples of 4 (TMA's 16-byte row strides of A (L,
    M, K) and B (L, K, N)); and where it pays (``f32_pays``) unless
    JAXEMU_CUDA_F32_OPERANDS is "1" (anywhere it can run) or "0" (never:
    switches.py)."""
    kind = ((s.fmt in ("bf16", "tf32") and s.scaling == "none" and term_weights(s) == 1)
            or (s.fmt == "fp16" and s.scaling == "row" and term_weights(s) == 2))
    runs = (switches.enabled("f32_operands") and kind and s.split == "rn"
            and (s.fmt, s.slices_of(0), s.slices_of(1), len(s.products)) in F32_KERNELS
            and k > 0 and k % 4 == 0 and n % 4 == 0)
    # (tf32 at short K: the slice kernel promotes every half K-tile there,
    # kernel_kc; this one's K-tile is already the scheme's kc.)
    pays = (f32_pays(m, n, batch) if s.fmt == "bf16"
            else f32_tf32_pays(m, n, batch) and kernel_kc(s, k) == s.kc if s.fmt == "tf32"
            else (not any(s.exact) and f32_fp16_pays(m, n)))
    return runs and (switches.forced("f32_operands") or pays)


def f32_scales_in_kernel(s: FloatSplit, m: int, k: int, n: int, batch: int = 1) -> bool:
    """Whether fp16x3 on the FP32-operand kernel, given no exponents by its
    caller, finds them in the kernel (f32_product): fp16 slices, no exact
    operand (its exponents are zero, no pass), JAXEMU_CUDA_F32_SCALES_IN_KERNEL
    not "0", and passes over A and B of at least
    F32_SCALES_IN_KERNEL_MIN_BYTES that it saves ("1": wherever it can run)."""
    if s.fmt != "fp16" or any(s.exact) or not switches.enabled("f32_scales_in_kernel"):
        return False
    return switches.forced("f32_scales_in_kernel") or 4 * batch * (m + n) * k >= F32_SCALES_IN_KERNEL_MIN_BYTES


def f32_tiles(m: int, n: int, batch: int = 1) -> int:
    """Output tiles of the FP32-operand kernel (128 x 128)."""
    return -(-m // TILE_M) * -(-n // 128) * batch


def f32_pays(m: int, n: int, batch: int = 1) -> bool:
    """Whether the FP32-operand kernel beats the slice path: outputs of at
    most F32_MAX_WAVES waves of its tiles, where the split passes cost as
    much as a large share of the GEMM, or more (its measurements). Exact
    operands too: on the k-means update with its one-hot exact (H200,
    scripts/onehot_bench.py, one process, stop 35) bf16x6 took 5.22 ms here
    against 6.81 on the slice path, bf16x3 4.35 against 5.47, although this
    kernel reads the one-hot in FP32 where the slice path writes it in 16
    bits."""
    return f32_tiles(m, n, batch) <= F32_MAX_WAVES * sm_count()


def f32_tf32_pays(m: int, n: int, batch: int = 1) -> bool:
    """Whether tf32x3 takes the FP32-operand kernel: outputs of at most one
    wave of its tiles. Its cut transposes B's K-tiles (wgmma reads tf32
    K-major only) and the K-loop runs at ~1.7x SGEMM whatever the shape,
    where the slice path, paying its split passes, runs 0.84x on the k-means
    update and 1.82x at 2048^3. H200 (scripts/tf32_f32_session.sh, one
    process, x SGEMM, slice path / kernel, normal(0,1), stop 61): 1024 x
    2^20 x 256 (16 tiles) 0.84 / 1.72; 512 x 2^20 x 512 (16) 0.90 / 1.71;
    1024 x 262144 x 512 (32) 1.27 / 1.83; 1024^3 (64) 0.78 / 1.31; 1536^3
    (144) 1.33 / 1.17; 2048^3 (256) 1.82 / 1.68; 4096^3 (1024) 2.22 / 1.77."""
    return f32_tiles(m, n, batch) <= sm_count()


# fp16x3 takes the FP32-operand kernel where M N / (M + N) <= this
# (f32_fp16_pays). Its slice path reads and writes each operand in passes
# whose bytes grow with (M + N) K while the GEMM grows with M N K; the
# kernel runs at ~2.0x SGEMM whatever the shape (2.23x at 8192^3; what
# bounds it is not profiled yet). H200, x SGEMM, slice path / kernel,
# normal(0,1), one process (scripts/f32_ab.py, docs/performance.md stop
# 43): 1024 x 1048576 x 256 (M N / (M + N) = 205, the k-means update)
# 1.23 / 1.78; 512 x 1048576 x 512 (256) 1.35 / 1.91; 1024 x 524288 x 512
# (341) 1.71 / 1.92; 1024 x 262144 x 1024 (512) 2.51 / 2.03, but 1024 x
# 1048576 x 1024 (512) 1.71 / 2.03; 2048 x 131072 x 1024 (683) 2.88 /
# 2.01; 4096 x 65536 x 1024 (819) 3.09 / 2.04; 2048^3 2.24 / 1.84; 8192^3
# 4.02 / 2.23. With an exact operand (the update as k-means writes it,
# one-hot) the slice path splits only the other operand and stays ahead:
# 5.33 ms against 5.51 (scripts/onehot_bench.py).
F32_FP16_MAX_SIZE = 384


def f32_fp16_pays(m: int, n: int) -> bool:
    """Whether fp16x3 (no exact operand) runs faster on the FP32-operand
    kernel than on the slice path: M N / (M + N) <= F32_FP16_MAX_SIZE."""
    return m * n <= F32_FP16_MAX_SIZE * (m + n)


def f32_splits(m: int, n: int, k: int, batch: int) -> int:
    """K-splits of the FP32-operand kernel at its 128 x 128 tiles (k_splits)."""
    return k_splits(f32_tiles(m, n, batch), max(1, -(-k // F32_TILE_K)), 8, sm_count())


def f32_row_exponents(x, s: FloatSplit, side: int, given=None):
    """fp16's row-scaling exponents of one operand of the FP32-operand kernel,
    (L, rows) int32: A's rows (side 0, x (L, M, K)) or B's columns (side 1,
    x (L, K, N)). Zero for an operand the scheme knows to be exact (as its
    one slice is unscaled: exact_slices); else ``given`` (the caller's, e.g.
    backends.row_scales), else one XLA reduction over x."""
    bsz = x.shape[0]
    rows = x.shape[1 + side]
    if s.exact[side]:
        return jnp.zeros((bsz, rows), jnp.int32)
    if given is not None:
        return given.reshape(bsz, rows).astype(jnp.int32)
    return xla_backend.row_scale_exponents(x, 2 - side).reshape(bsz, rows).astype(jnp.int32)


def f32_product(a, b, s: FloatSplit, scales=None, find_exps: bool = True):
    """``s``'s product of float32 (L, M, K) x (L, K, N) on the FP32-operand
    kernel (``f32_kernel`` says where it runs), FP32 special values included: the kernel gives
    every entry of C that is not finite its FP32 value (NaN and Inf where the
    FP32 product has them; FP32's own value where the emulation overflowed),
    deciding on the device, so there is no conditional and no pass over C
    (ffi/fused/params.h: SplitF32). fp16x3: ``scales``, the row exponents
    (ea, eb) if the caller has them (backends.row_scales), else one pass over
    each operand for them (an exact operand's are zero, as on the slice
    path); or, where the caller has none, ``find_exps`` (and
    ``f32_scales_in_kernel``: large passes saved, the switch not "0"), found by the kernel
    (F32_EXP_HEADROOM), and the product redone with the passes' exponents
    where C holds an entry that is not finite."""
    bsz, m, k = a.shape
    n = b.shape[2]
    # bf16: every term promotes after every K-tile: the kernel issues all terms of
    # a 32-wide K-tile in turn, so a chunk of several K-tiles would add the
    # small terms of its second tile onto hi*hi's partial sum, truncating
    # them at hi*hi's scale (2.0-2.1x the slice path's error on bf16x6 and
    # bf16x9 at K = 4096 with the scheme's 64-step chunks, H200). One
    # K-tile per chunk keeps each small term at its own scale, as the slice
    # kernel's 64-wide tiles do, at 64 FMAs per thread and K-tile.
    # (fp16x3's two weights take two partial accumulators, one per weight,
    # as on the slice path: the scheme's own intervals apply.)
    t = terms_of(s, k, F32_TILE_K)
    fp16 = s.fmt == "fp16"
    splits = f32_splits(m, n, k, bsz)
    # fp16's exponents found in the kernel where the caller has none and the
    # passes they save are large (f32_scales_in_kernel).
    in_kernel = find_exps and scales is None and f32_scales_in_kernel(s, m, k, n, bsz)
    if fp16 and not in_kernel:
        given = (None, None) if scales is None else scales
        ea = f32_row_exponents(a, s, 0, given[0])
        eb = f32_row_exponents(b, s, 1, given[1])
    else:
        if not fp16:
            t = t._replace(kc_tiles=(1,) * len(s.products))
        ea = eb = jnp.zeros((0,), jnp.int32)
    out_types = (jax.ShapeDtypeStruct((bsz, m, n), jnp.float32),
                 jax.ShapeDtypeStruct((splits, bsz, m, n) if splits > 1 else (1,), jnp.float32),
                 jax.ShapeDtypeStruct((1,), jnp.int32),
                 jax.ShapeDtypeStruct((splits * bsz * (m + n),) if in_kernel else (1,), jnp.int32))
    c, _, flags, _ = jax.ffi.ffi_call("jaxemu_fused_f32", out_types)(
        a, b, ea.astype(jnp.int32), eb.astype(jnp.int32),
        term_a=np.array(t.a, np.int64), term_b=np.array(t.b, np.int64),
        term_exp=np.array(t.exp, np.int64), kc_tiles=np.array(t.kc_tiles, np.int64),
        splits=np.int64(splits), slices_a=np.int64(s.slices_of(0)), slices_b=np.int64(s.slices_of(1)),
        lo_scale_bits=np.int64(s.lo_scale_bits),
        register_a=np.int64(switches.enabled("f32_register_a") and s.fmt == "bf16"), fp16=np.int64(fp16),
        tf32=np.int64(s.fmt == "tf32"),
        exp_headroom=np.int64(F32_EXP_HEADROOM if in_kernel else -1))
    if in_kernel:
        # An entry of C that is not finite: a special value, or a value past
        # the headroom that the pass's exponents would have held. No fix-up
        # ran (ffi/fused_dispatch.cu: finish_f32); the product is redone
        # with the pass's exponents, whose own fix-up settles the special
        # values. The predicate costs a device-to-host copy, and the branch
        # that keeps C a copy of C: small here, where fp16x3 takes this
        # kernel (outputs of M N / (M + N) <= F32_FP16_MAX_SIZE).
        c = jax.lax.cond(flags[0] != 0, lambda: f32_product(a, b, s, find_exps=False), lambda: c)
    return c


def exact_operand(sl, k: int, transposed: bool = False):
    """An exact operand as float32, from its one slice (``exact_slices``):
    (L, rows, K), or (L, K, rows) when ``transposed``."""
    x = sl.reshape(sl.shape[0], sl.shape[1], -1)[:, :, :k].astype(jnp.float32)
    return jnp.swapaxes(x, 1, 2) if transposed else x
