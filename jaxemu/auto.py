"""The "auto" scheme (APE's adapter): the fastest scheme the data allow.

auto sits above the backends: the primitive hands it a concrete product
``product(a, b, scheme)`` (jaxemu.backends), and auto composes fp16x3,
bf16x6 and FP32 products of it. Nothing below this module imports it.

1. Data test, at run time, in one pass over each operand (``operand_stats``):
   per row of A and column of B (the unit of fp16x3's power-of-two scaling)
   the largest and the smallest nonzero |value| and the sum of |values|, and
   for the normwise test one column of C (a matrix-vector product in the
   same pass over A).
   * bf16x6 / FP32, both criteria: a row or column is class 2 ("fp32") when
     it holds values beyond 2^100 or below 2^-100, where bf16 slices or their
     residuals under- or overflow, or values whose products with the other
     operand's would leave FP32's normal range: bf16x6 does not scale, so its
     smallest slice products sit 2^-16 below the product and are flushed
     where FP32's own product is still normal (a row at 2^-60 times a column
     at 2^-60), and a slice rounded up can overflow where the product does
     not (2^64 - ulp squared). Each row is paired with the smallest (largest)
     exponent of the whole other operand, so every pair of rows and columns
     that is not class 2 is safe for bf16x6. Otherwise class 1.
   * fp16x3, criterion="normwise" (the default; docs/accuracy.md has the
     derivation and the measurements). fp16x3 scales a row whose largest
     |value| lies in [2^e, 2^(e+1)) to [2^13, 2^14) and keeps x as
     hi + lo 2^-12 (fp16 both), dropping the lo x lo product. Its ordinary
     rounding (22+ bits per value, what makes it FP32-class) changes a
     product a b by at most 3 2^-22 |a b|; the bits that fp16's subnormal
     grid cuts from values far below their row's maximum (in the split and
     in the dropped lo x lo term) change it by at most
     2^(e_i - 48) |b| + 2^(f_j - 48) |a| more (e_i, f_j: the exponents of the
     maxima of a's row and b's column). Over C = AB, in Frobenius norm, by at
     most
         E = 2^-48 (||amax||_2 ||Lb||_2 + ||La||_2 ||bmax||_2)
     (amax, La: the rows' largest |value| and sums of |values|; bmax, Lb the
     columns'). fp16x3 runs when E <= 2^-26 ||C||_F, a quarter of FP32's
     unit roundoff (SGEMM's own error on the benchmark's laws is 2-16
     units), with ||C||_F bounded from below by ||A b_j||_2 for the column j
     of B with the largest sum, computed in FP32 and lowered by its own
     rounding bound. Both sides are bounds, so this part is rigorous; it is
     loose by about sqrt(N) (one column of C stands for all of them), which
     the benchmark's laws pass by a factor of 30 or more at 8192^3. The same
     pass also checks that the probed column of C sums many products that
     matter (MIN_TERMS): on sums of a few products FP32 is exact but for its
     last rounding, and fp16x3's 22 bits per value show (up to ~3x FP32's
     error).
   * fp16x3, criterion="componentwise": a row is class 0 when its nonzero
     exponents lie within FP16_SPREAD binades (and it is class 1 otherwise):
     then every value keeps 22+ bits, whatever its partner in the other
     operand; one value 2^-25 below its row's maximum refuses the row. An
     output element needs the higher class of its row and column.
2. Candidates (static, per shape): pure fp32, fp16x3, bf16x6, and hybrids
   (APE's block-wise hybrid at row/column granularity): rows of A and
   columns of B ordered from most to least fp16x3-friendly (class, or their
   share of E) are gathered to the front; the top-left p x q block of C runs
   fp16x3, the rest bf16x6 (two or three products). One-sided splits
   (q = N or p = M) at 1/4, 1/2, 3/4 of M (N), two-sided ones at 1/2 and
   3/4, in multiples of ``block``. Gathering instead of masking tiles means
   no scheme computes a block it does not keep, on any backend.
3. Each candidate's time comes from the device's cost model (costs.py:
   calibrated or shipped per GPU model); without one, from slice-product
   counts plus the size thresholds ``min_flops`` / ``min_dim``. Emulated
   candidates predicted slower than 0.9 x FP32 are dropped, so that auto is
   never meant to lose to SGEMM; if none is left, auto is native FP32 for
   that shape, decided at trace time and reported by ``explain``. Where
   bf16x6 is the fastest candidate the plan is bf16x6 or FP32: every hybrid
   is slower and needs bf16x6's range anyway, and fp16x3's test (a pass
   over both operands) would pay only on data near FP32's limits.
4. At run time the fastest candidate the test allows runs (a plan of bf16x6
   or FP32 tests the exponent ranges alone, with an exact operand's bounds
   instead of a pass over it). The common case
   costs one conditional: when fp16x3 is the fastest candidate and passes,
   it runs; otherwise the hybrids' tests run and lax.switch picks among the
   rest (only the chosen branch executes; FP32 is always allowed). Every
   candidate is compiled, so the hybrids share one branch that splits A and
   B once per scheme (the backend's SplitProduct), gathers each product's
   slices, and applies FP32's special values once to C: the same numbers as
   each product run on its own, in a program several times smaller than
   one holding every product whole (issue 13, docs/auto.md "Compile time").
NaN/Inf need no class of their own: every scheme reproduces FP32's NaN/Inf
pattern (backends/xla.py), and the test reads the finite values only.
Known limit: fp16x3 keeps 22-23 significant bits per value, so where an
entry of C is a sum of few products (small K, or one product dominating) its
error exceeds FP32's. The normwise test's term count refuses the second case
where the probed column shows it; small K is never emulated by default: the
size thresholds need K >= 2048, and the H200 cost model predicts FP32 faster
for K <= 128 at any M = N up to 32768.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import jax.numpy as jnp
import numpy as np
from jax import lax

from . import costs
from . import backends
from .backends import SplitProduct, backend_for, xla
from .backends.xla import exponent, ldexp
from .schemes import EXACT_MAX, Auto, exact_variant, get_scheme

# componentwise: fp16x3 keeps full precision for values within ~26 binades
# below their row's maximum (hi and lo stay normal in fp16 after scaling the
# maximum to [2^13, 2^14)); 24 leaves a margin.
FP16_SPREAD = 24
# normwise: beyond its ordinary rounding, fp16x3 changes a product a b by at
# most 2^(e + FP16X3_FLOOR_EXP) |b| for a in a row whose maximum is in
# [2^e, 2^(e+1)) (and likewise for b's column): with the row's maximum scaled
# to [2^13, 2^14) (backends/xla.py split_float), lo's grid 2^-24 cuts at most
# 2^-37 from a value, and the dropped lo x lo product at most 2^-25 2^-11 |b|
# (a's lo below fp16's normal range times b's): together 1.5 2^-36, under
# 2^-35 at the row's scale 2^-13, i.e. 2^(e-48).
FP16X3_FLOOR_EXP = -48
# ... and may add at most 2^BUDGET_EXP ||C||_F by the bits it loses: a
# quarter of FP32's unit roundoff.
BUDGET_EXP = -26
# fp16x3 keeps 22 bits per value where FP32's product keeps 24: where an
# entry of C sums few products that matter, FP32's error is little more than
# its final rounding and fp16x3's is larger (CPU, uniform data: 1.8x FP32's
# at K = 4, 1.5x at 8, 1.2x at 16, 1.0x from 64, where FP32's summation
# errors take over; rows with 8 nonzeros of 256: 1.5x). The normwise test
# also needs the entries of the probed column of C to sum at least
# MIN_TERMS products, each counted as (|a_ik b_kj| / largest)^(1/8): 1/2 at
# 2^-8 below the largest, 1/8 at 2^-24, 0 for zeros (dense uniform data:
# about 0.85 K; 8 nonzeros: 7; wide-exp: 32 at K = 256, where fp16x3 is
# 0.85x FP32's). Not caught: one product 2^28 or more above all the others
# of a long sum (FP32 then absorbs the others exactly; fp16x3 measured up
# to 3x FP32's error, i.e. ~3 units of roundoff).
MIN_TERMS = 24
UNIT_ROUNDOFF = 2.0 ** -24
# Exponent window in which bf16/fp16 slices and their residuals stay normal
# and partial sums cannot overflow.
SAFE_MIN_EXP = -100
SAFE_MAX_EXP = 100
# Window for the exponent sum of a value of A and a value of B: bf16x6's
# lowest slice products (2^-16 below) stay normal down to a sum of -110, and
# slices rounded up cannot overflow below 126; margins of 10 and 2.
PAIR_MIN_EXP = -100
PAIR_MAX_EXP = 124
# Emulation, its data test included (costs.data_test_time), must be predicted
# at least this much faster than FP32 to be tried (the cost model's error is
# the margin).
PAYS = 0.9
SPLIT_FRACTIONS = (0.25, 0.5, 0.75)   # one-sided hybrids
BOTH_FRACTIONS = (0.5, 0.75)          # two-sided: fewer, each one is a branch to compile

CHOICES = ("fp16x3", "bf16x6", "fp32")
CLASS = {name: i for i, name in enumerate(CHOICES)}


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One way to run a (M, K) x (K, N) product: fp16x3 on the first ``rows``
    rows of A (in the data test's order) times its first ``cols`` columns of
    B, and ``scheme`` on the rest of C; ``hybrid=False``: ``scheme`` on all of C."""

    scheme: str
    time: float
    hybrid: bool = False
    rows: int = 0
    cols: int = 0

    @property
    def label(self) -> str:
        return f"fp16x3+{self.scheme}" if self.hybrid else self.scheme


@dataclasses.dataclass(frozen=True)
class AutoPlan:
    """auto's static decision for one shape: the candidates, fastest first
    (a single fp32 one when emulation does not pay), and why."""

    candidates: Tuple[Candidate, ...]
    reason: str
    cost_source: str

    @property
    def static(self) -> Optional[str]:
        return self.candidates[0].scheme if len(self.candidates) == 1 else None

    @property
    def ranges_only(self) -> bool:
        """No candidate needs fp16x3's test: the exponent ranges decide
        (bf16x6 or FP32, ``plan``)."""
        return all(c.scheme in ("bf16x6", "fp32") and not c.hybrid for c in self.candidates)


def _splits(r: int, block: int, fractions) -> List[int]:
    return sorted({int(f * r) // block * block for f in fractions} - {0, r})


def _hybrid_splits(m: int, n: int, block: int) -> List[Tuple[int, int]]:
    """(rows, cols) of the fp16x3 block of each hybrid candidate."""
    one = [(p, n) for p in _splits(m, block, SPLIT_FRACTIONS)] + [(m, q) for q in _splits(n, block, SPLIT_FRACTIONS)]
    both = [(p, q) for p in _splits(m, block, BOTH_FRACTIONS) for q in _splits(n, block, BOTH_FRACTIONS)]
    return one + both


def _cost_model(s: Auto, platform: Optional[str], backend: Optional[str]):
    if s.cost_model == "counts" or platform is None:
        return None
    import jax
    try:
        dev = jax.devices(platform)[0]
    except RuntimeError:
        return None
    return costs.model_for(dev.device_kind, backend or "xla")


# The time of auto's emulated candidates with an exact operand, as a share
# of the full scheme's on the same kernel path, measured on an H200
# (scripts/onehot_bench.py, the k-means update one_hot(1M, 1024)^T X(1M, 256),
# one process each): on the slice path (stop 24) fp16x3 6.15 vs 9.63 ms,
# bf16x6 7.18 vs 12.74 ms; on the FP32-operand kernel, which bf16x6 takes
# there (stop 35), 5.22 vs 6.95 ms. Not the share of slice products (2/3 and
# 1/2): the other operand's split and the exact operand's read stay. Each
# was measured with the left operand exact and is taken for either side; a
# model with no fit of the f32 path (the shipped H100's) prices that path
# with its main fit and the main path's share.
EXACT_SHARE = {"": {"fp16x3": 0.64, "bf16x6": 0.56}, "f32": {"bf16x6": 0.75}}


def exact_share(name: str, exact, path: str = "") -> float:
    """auto's estimate of a scheme's cost with exact operands
    (FloatSplit.with_exact), as a share of its cost in full on kernel path
    ``path`` (costs.path_of): EXACT_SHARE, else (other schemes and paths)
    the share of slice products left; 1 for FP32."""
    sc = get_scheme(name)
    variant = exact_variant(sc, exact)
    if variant is sc:
        return 1.0
    return EXACT_SHARE.get(path, {}).get(name, variant.num_products / sc.num_products)


def plan(bsz: int, m: int, n: int, k: int, s: Auto, platform: Optional[str] = None,
         backend: Optional[str] = None, model=None, exact=(False, False)) -> AutoPlan:
    """The candidates auto considers for a (bsz, m, k) x (bsz, k, n) product
    on ``platform`` with ``backend`` running the emulated schemes; ``model``
    (a costs.CostModel) overrides the device's, e.g. to ask what auto would
    do on another GPU; ``exact``: operands known to hold small integers
    (their products cost ``exact_share`` of the full scheme's)."""
    model = model or _cost_model(s, platform, backend)
    shape = (bsz, m, n, k)
    if model is None:
        source = "slice-product counts (no cost model for this device: see jaxemu.calibrate)"
        flops = 2 * bsz * m * n * k
        if flops < s.min_flops:
            return AutoPlan((Candidate("fp32", 0.0),),
                            f"2MNK = {flops:.3g} < {s.min_flops:.3g}: too small for emulation to pay", source)
        if min(m, n, k) < s.min_dim:
            return AutoPlan((Candidate("fp32", 0.0),),
                            f"min(M, N, K) = {min(m, n, k)} < {s.min_dim}: too thin for emulation to pay", source)

        def cost(name, b, mm, nn, kk, path=None):
            return 2.0 * b * mm * nn * kk * costs.product_weight(name) * exact_share(name, exact)

        def gather(rows, cols):
            return 0.0
    else:
        source = model.source

        def cost(name, b, mm, nn, kk, path=None):
            p = model.priced_path(name, (b, mm, nn, kk), path, exact)
            return model.time(name, (b, mm, nn, kk), p) * exact_share(name, exact, p)

        def gather(rows, cols):
            return model.gather_time(shape, rows, cols)
    # Every emulated candidate waits for the data test (costs.data_test_time:
    # on small products it costs more than emulation saves): the one its
    # plan would run if it came first, fp16x3's or, for bf16x6, the ranges
    # alone (below).
    t_test = t_ranges = 0.0
    if model is not None:
        t_test, t_ranges = (costs.data_test_time(shape, exact, r) for r in (False, True))
    t32 = cost("fp32", *shape)
    extra = {"fp32": 0.0, "bf16x6": t_ranges, "fp16x3": t_test}
    cands = [Candidate(name, cost(name, *shape) + extra[name]) for name in CHOICES]
    for p, q in _hybrid_splits(m, n, s.block):
        # fp16x3 on C[:p, :q]; bf16x6 on C[:p, q:] and C[p:, :] (empty parts cost nothing),
        # on the backend's main path: they share one split (costs.path_of)
        t = t_test + cost("fp16x3", bsz, p, q, k, "") + gather(p < m, q < n)
        t += cost("bf16x6", bsz, p, n - q, k, "") if q < n else 0.0
        t += cost("bf16x6", bsz, m - p, n, k, "") if p < m else 0.0
        cands.append(Candidate("bf16x6", t, True, p, q))
    t6 = cands[1].time
    keep = [c for c in cands if (c.scheme == "fp32" and not c.hybrid)
            or (c.time <= PAYS * t32 and (not c.hybrid or c.time < t6))]
    keep.sort(key=lambda c: c.time)
    if len(keep) == 1:
        best = min(cands[:2], key=lambda c: c.time)  # the faster pure emulation
        return AutoPlan(tuple(keep), f"the cost model predicts {best.scheme} {best.time * 1e3:.3g} ms (auto's data "
                        f"test included) against FP32's {t32 * 1e3:.3g} ms: emulation does not pay here", source)
    if keep[0].scheme == "bf16x6" and not keep[0].hybrid:
        # Every hybrid needs bf16x6's range and is slower; what is left is
        # fp16x3, which the normwise test could admit where bf16x6's range
        # test refuses (values within 2^100 of FP32's limits). For that rare
        # case auto would pay, on every call, fp16x3's test: a pass over
        # both operands, probe included (the k-means update's 1M x 1024
        # one-hot: 0.95 ms of auto's 6.3 ms GPU timeline, H200, stop 35).
        # It runs FP32 there instead.
        return AutoPlan((keep[0], Candidate("fp32", t32)),
                        "bf16x6 is the fastest candidate: it runs where its range test allows, else FP32", source)
    return AutoPlan(tuple(keep), "the fastest candidate the data allow, chosen at run time", source)


# ----------------------------------------------------------------------------
# The data test.

class Stats(NamedTuple):
    """Per row of A (B, M) and column of B (B, N), over their finite values:
    largest |value|, smallest nonzero |value| (inf for none), sum of |values|.
    Normwise test only (else None), for v = 2^-eb b_j, the column j of B with
    the largest sum (eb (B,): the exponent of that sum), per row of A (B, M):
    y = A v, z = |A| |v|, m = max_k |a_ik v_k|, q = sum_k |a_ik v_k|^(1/8).
    With the probe on B's side (``_rows_probe_of_b``, DataTest.probe_on_b)
    the same four per column of B, for u = 2^-ea a_i, the row i of A with
    the largest sum, and eb holds ea. a_bad, b_bad: 1.0 per row of A /
    column of B holding a NaN or +-Inf (``fits``)."""

    a_max: jnp.ndarray
    a_min: jnp.ndarray
    a_l1: jnp.ndarray
    b_max: jnp.ndarray
    b_min: jnp.ndarray
    b_l1: jnp.ndarray
    y: Optional[jnp.ndarray] = None
    z: Optional[jnp.ndarray] = None
    m: Optional[jnp.ndarray] = None
    q: Optional[jnp.ndarray] = None
    eb: Optional[jnp.ndarray] = None
    a_bad: Optional[jnp.ndarray] = None
    b_bad: Optional[jnp.ndarray] = None

    def fits(self, k: int):
        """True (traced) where A and B are finite and the product cannot
        overflow (xla.product_fits): every product then runs without FP32's
        special-value conditional (backends' Product ``fits``)."""
        return ((jnp.max(self.a_bad, initial=0.0) == 0) & (jnp.max(self.b_bad, initial=0.0) == 0)
                & xla.product_fits(jnp.max(self.a_max, initial=0.0), jnp.max(self.b_max, initial=0.0), k))


_side = xla.finite_extremes
# Probe columns of at least this many values (B x K) are gathered in a
# fusion of their own (operand_stats).
PROBE_FENCE_MIN = 1 << 14


def _exact_bounds(x, side: int):
    """Per row of a (B, M, K) (side 2) or column of b (B, K, N) (side 1):
    bounds of finite_extremes' statistics for an exact operand: largest
    |value| <= EXACT_MAX, smallest nonzero >= 1, sum <= K EXACT_MAX, no NaN
    or Inf. Wider than the values are, so the range tests only refuse more."""
    shape = (x.shape[0], x.shape[1] if side == 2 else x.shape[2])
    one = jnp.ones(shape, jnp.float32)
    return EXACT_MAX * one, one, EXACT_MAX * x.shape[side] * one, jnp.zeros(shape, jnp.float32)


def column_stats(b, kernels: Optional[backends.StatsKernels] = None):
    """Per column of canonical b (B, K, N), as ``operand_stats`` takes them:
    (max |b|, min nonzero |b|, sum |b|, 1.0 where not finite), each (B, N),
    by the backend's kernel or XLA's reductions. A function of B alone: for
    a loop-invariant B, jaxemu/hoist.py takes them once, before the loop."""
    return kernels.columns(b) if kernels else _side(_wide(b), 1)


def operand_stats(a, b, normwise: bool = True, kernels: Optional[backends.StatsKernels] = None,
                  exact=(False, False), b_stats=None) -> Stats:
    """The data test's statistics of canonical a (B, M, K), b (B, K, N): one
    pass over B (reductions over K), then one over A (reductions over K, the
    probe A v among them), plus a gather of one column of B. ``kernels``:
    the backend's one-pass kernels for both passes (backends.stats_for), or
    None: XLA's reductions (as separate reductions: as one variadic reduce,
    XLA 0.11 on an H200 once wrote its seven inputs to memory, 18 GB at the
    k-means update's 1024 x 1M: 11 ms against 3.3; docs/performance.md,
    stop 25). ``exact`` (with ``normwise`` False only: the probe needs the
    values): the sides known exact get their bounds (_exact_bounds), no
    pass over them. ``b_stats``: B's ``column_stats`` taken ahead (outside
    a loop), or None."""
    a_in, b_in = a, b
    if not normwise:
        b_max, b_min, b_l1, b_bad = (_exact_bounds(b, 1) if exact[1] else
                                     b_stats if b_stats is not None else column_stats(b_in, kernels))
        a_max, a_min, a_l1, a_bad = (_exact_bounds(a, 2) if exact[0] else
                                     kernels.rows(a_in) if kernels else _side(_wide(a), 2))
        return Stats(a_max, a_min, a_l1, b_max, b_min, b_l1, a_bad=a_bad, b_bad=b_bad)
    if any(exact):
        raise ValueError("operand_stats: exact bounds are for the range test alone (normwise=False)")
    b_side, v = _columns_and_probe(b, kernels, b_stats)
    if kernels:
        return _stats_of_rows(kernels.rows(a_in, v), b_side)
    a = _wide(a)  # (an exact operand may come in 16 bits)
    a0 = jnp.where(jnp.isfinite(a), a, 0.0)
    a_max, a_min, a_l1, a_bad = _side(a, 2)
    av = a0 * v[:, None, :]
    t = jnp.abs(av)
    y = _blocked_sum(av)   # reductions, not a dot: they share A's pass
    z = _blocked_sum(t)
    m = jnp.max(t, axis=2, initial=0.0)
    q = jnp.sum(_root8(t), axis=2)
    return _stats_of_rows((a_max, a_min, a_l1, a_bad, y, z, m, q), b_side)


def _columns_and_probe(b, kernels: Optional[backends.StatsKernels] = None, b_stats=None):
    """B's column statistics (max, min nonzero, sum of |b|, non-finite flag,
    then eb: the exponent of the largest sum) and the probe v (B, K): B's
    column of the largest sum, scaled by 2^-eb (|v| < 2), its non-finite
    values as 0."""
    b_in, b = b, _wide(b)
    b0 = jnp.where(jnp.isfinite(b), b, 0.0)
    b_max, b_min, b_l1, b_bad = b_stats if b_stats is not None else column_stats(b_in, kernels)
    j = jnp.argmax(b_l1, axis=1)                                           # (B,)
    eb = exponent(jnp.max(b_l1, axis=1, initial=0.0))                      # (B,)
    # The gather of column j in a fusion of its own where it is long: XLA
    # (GPU, 0.11) made it a side output of the test's reductions of B's
    # column statistics to scalars, whose launch (a few blocks) then gathers
    # B's column alone: 31.8 us for 8 x 2048 values at 8 x 2048^3, 1.6 us for
    # 2048 at 2048^3 (H200; docs/performance.md, stop 31), where a launch of
    # its own would cost more than it saves. The barriers change no value.
    fence = b.shape[0] * b.shape[1] >= PROBE_FENCE_MIN
    if fence:
        j, eb = lax.optimization_barrier((j, eb))
    v = ldexp(jnp.take_along_axis(b0, j[:, None, None], axis=2)[:, :, 0], -eb[:, None])  # (B, K), |v| < 2
    if fence:
        v = lax.optimization_barrier(v)
    return (b_max, b_min, b_l1, b_bad, eb), v


def _rows_probe_of_b(a, a_l1, b, kernels: backends.StatsKernels):
    """The probe transposed: u = 2^-ea a_i, the row of A with the largest
    sum of |a| (ea: that sum's exponent; non-finite values as 0), and B's
    columns' eight statistics with it (the row statistics kernel over B^T:
    max, min nonzero and sum of |b|, the non-finite flag, then the sums of
    t = b_j u over K), each (B, N); and ea (B,). ||u B|| 2^ea = ||a_i B|| is
    a row of C, so ||C||_F >= it as it is >= a column's: the test of
    C^T = B^T A^T, run where B is the smaller operand, so that the pass
    carrying the probe reads B and A's pass needs the extremes alone."""
    a = _wide(a)
    i = jnp.argmax(a_l1, axis=1)                                            # (B,)
    ea = exponent(jnp.max(a_l1, axis=1, initial=0.0))                      # (B,)
    row = jnp.take_along_axis(a, i[:, None, None], axis=1)[:, 0, :]         # (B, K)
    u = ldexp(jnp.where(jnp.isfinite(row), row, 0.0), -ea[:, None])         # |u| < 2
    return kernels.rows(jnp.swapaxes(b, 1, 2), u), ea


def _stats_of_rows(row8, b_side) -> Stats:
    """Stats from A's eight row statistics (StatsKernels.rows' order) and
    ``_columns_and_probe``'s B side."""
    a_max, a_min, a_l1, a_bad, y, z, m, q = row8
    b_max, b_min, b_l1, b_bad, eb = b_side
    return Stats(a_max, a_min, a_l1, b_max, b_min, b_l1, y, z, m, q, eb, a_bad, b_bad)


# With A's statistics taken by its split, the probe runs over B (a row of A
# probing B's columns) where A has at least this many times B's columns:
# the pass carrying the probe then reads the smaller operand, and A's split
# sums only the four extremes (k-means' distances: 2^20 rows of A against
# 1024 columns of B). The price: the lower bound on ||C||_F then comes from
# a row of C (N entries) instead of a column (M entries), about sqrt(M / N)
# weaker on data of similar rows and columns (a review's measurement, stop
# 57: 3.9x at M / N = 16, 31x at 1024; the distances' sqrt(1024) = 32), so
# data that today's test admits with less margin than that is refused
# (speed, not accuracy: the test can only refuse more). The benchmark's four
# laws at the distances keep ratios of 1.7e-3 to 3.3e-2 (docs/auto.md); on
# the H200 this form is the default (stop 58: auto over fp16x3 at the
# distances 1.02-1.06 against 1.08-1.16 with the statistics' own pass).
PROBE_B_RATIO = 4


def probe_on_b(m: int, n: int) -> bool:
    """Whether auto's probe runs over B's columns (``_rows_probe_of_b``)
    rather than A's rows, where A's statistics come from its split."""
    return m >= PROBE_B_RATIO * n


def operand_stats_with_split(a, b, kernels: backends.StatsKernels, b_stats=None, probe_b: bool = False):
    """The normwise test's statistics (``operand_stats``) with A's taken by
    fp16x3's split of A in the same read (``kernels.split_rows``): (Stats,
    that split, for fp16x3's ``presplit``), or None where that split cannot
    run for this product (B's statistics are then left to operand_stats).
    ``probe_b``: the probe on B's side (``_rows_probe_of_b``): A's split
    sums the four extremes alone, and B's pass carries the probe."""
    if kernels is None or kernels.split_rows is None:
        return None
    if probe_b:
        got = kernels.split_rows(a, None, b.shape[2])
        if got is None:
            return None
        split, (a_max, a_min, a_l1, a_bad) = got
        b8, ea = _rows_probe_of_b(a, a_l1, b, kernels)
        b_max, b_min, b_l1, b_bad, y, z, m, q = b8
        return Stats(a_max, a_min, a_l1, b_max, b_min, b_l1, y, z, m, q, ea, a_bad, b_bad), split
    b_side, v = _columns_and_probe(b, kernels, b_stats)
    got = kernels.split_rows(a, v, b.shape[2])
    if got is None:
        return None
    split, row8 = got
    return _stats_of_rows(row8, b_side), split


def _classes_from(st: Stats):
    """Class (0, 1, 2) of each row of A (B, M) and column of B (B, N): 2 where
    bf16x6 is unsafe, else 0 where the componentwise fp16 test passes, else 1.

    A row passes the pair test against the smallest and largest exponents of
    the other operand's rows that pass their own window (the others are
    class 2, so their pairs run FP32 anyway). If rows i and j both pass,
    e_i + e_j is within [PAIR_MIN_EXP, PAIR_MAX_EXP] for all their values.
    Conservative: one tiny value in a row pairs with the other operand's
    tiniest, whether or not they meet in a product."""
    sides = []
    for amax, amin in ((st.a_max, st.a_min), (st.b_max, st.b_min)):
        sides.append((amax > 0, exponent(jnp.where(jnp.isinf(amin), amax, amin)), exponent(amax)))
    own = [(emax <= SAFE_MAX_EXP) & (emin >= SAFE_MIN_EXP) for _, emin, emax in sides]

    def extremes(side, ok):  # per batch element; rows that are zero or fail their window do not count
        nonzero, emin, emax = side
        use = nonzero & ok
        lo = jnp.min(jnp.where(use, emin, SAFE_MAX_EXP), axis=1, initial=SAFE_MAX_EXP)
        hi = jnp.max(jnp.where(use, emax, SAFE_MIN_EXP), axis=1, initial=SAFE_MIN_EXP)
        return lo[:, None], hi[:, None]
    others = [extremes(sides[1], own[1]), extremes(sides[0], own[0])]
    out = []
    for (nonzero, emin, emax), ok, (other_lo, other_hi) in zip(sides, own, others):
        in_window = ok & (emin + other_lo >= PAIR_MIN_EXP) & (emax + other_hi <= PAIR_MAX_EXP)
        fp16_ok = in_window & (emax - emin <= FP16_SPREAD)
        out.append(jnp.where(~nonzero | fp16_ok, 0, jnp.where(in_window, 1, 2)))
    return tuple(out)


def _root8(t):
    return jnp.sqrt(jnp.sqrt(jnp.sqrt(t)))


def _norm(x, axis=-1):
    return jnp.sqrt(jnp.sum(x * x, axis=axis))


def _pairwise_sum(s):
    """Sum along the last axis in a fixed binary tree of elementwise adds
    (which XLA does not reassociate): ceil(log2 n) roundings of the sum of
    |values|, where a float32 reduction over n values guarantees only n."""
    m = s.shape[-1]
    p = 1 << max(0, (m - 1).bit_length())
    s = jnp.pad(s, [(0, 0)] * (s.ndim - 1) + [(0, p - m)])
    while s.shape[-1] > 1:
        s = s.reshape(s.shape[:-1] + (-1, 2))
        s = s[..., 0] + s[..., 1]
    return s[..., 0]


def _norm_pairwise(x):
    """||x|| along the last axis, its squares summed pairwise
    (``_pairwise_sum``): a relative error of at most (ceil(log2 M) + 3) u,
    where a float32 reduction guarantees only M u (at the k-means distances'
    M = 2^20, 23 u against 2^20 u)."""
    return jnp.sqrt(_pairwise_sum(x * x))


# XLA's probe sums: float32 reductions over blocks of PROBE_BLOCK values of
# K, whose sums meet in a pairwise tree (``_blocked_sum``).
PROBE_BLOCK = 256


def _blocked_sum(t):
    """Sum over the last axis of t (B, M, K) as XLA's probe takes it: blocks
    of PROBE_BLOCK consecutive values reduced in float32 (any order: at most
    PROBE_BLOCK - 1 roundings), then the blocks' sums pairwise
    (``_pairwise_sum``)."""
    k = t.shape[-1]
    nb = -(-k // PROBE_BLOCK)
    if nb <= 1:
        return jnp.sum(t, axis=-1)
    t = jnp.pad(t, ((0, 0), (0, 0), (0, nb * PROBE_BLOCK - k))).reshape(t.shape[:-1] + (nb, PROBE_BLOCK))
    return _pairwise_sum(jnp.sum(t, axis=-1))


def xla_probe_roundings(k: int) -> int:
    """``_blocked_sum``'s error bound on the probe's sums in units of u per
    unit of sum |a v|: PROBE_BLOCK - 1 roundings in a block, ceil(log2) of the
    blocks in the tree, one for each product a v, one for margin (at the
    k-means update's K = 2^20: 269, where a float32 reduction guarantees
    only K)."""
    k = int(k)
    nb = -(-k // PROBE_BLOCK)
    return min(k, PROBE_BLOCK) + max(0, (nb - 1).bit_length()) + 1


def _tree_roundings(m: int) -> int:
    """``_norm_pairwise``'s error bound over m values, in units of u."""
    return max(0, (m - 1).bit_length()) + 3


class _Scaled(NamedTuple):
    """The normwise test's vectors, A's scaled by 2^-ea (ea: the exponent of
    its largest row sum), B's by 2^-eb, exactly, into [0, 2]: row maxima and
    sums fa, la (B, M); column maxima and sums fb, lb (B, N); rhs (B,):
    2^(BUDGET_EXP + 50) times the lower bound on ||C||_F in the same scale
    (-inf where a statistic is not finite); per_row (B, M): products that
    matter per entry of the probed column; w (B, M): the rows' weights
    (both (B, N), per entry of the probed row, with the probe on B's side)."""

    fa: jnp.ndarray
    la: jnp.ndarray
    fb: jnp.ndarray
    lb: jnp.ndarray
    rhs: jnp.ndarray
    per_row: jnp.ndarray
    w: jnp.ndarray


class DataTest:
    """auto's run-time test on canonical operands a (B, M, K), b (B, K, N):
    which candidates their data allow, and the order in which hybrids gather
    rows and columns. Everything is computed from ``operand_stats`` (one
    pass over each operand); the hybrids' parts (sorts) only when asked.
    ``probe_roundings``: the error bound of the probe's sums in units of
    UNIT_ROUNDOFF (None: XLA's blocked sums, ``xla_probe_roundings``; the
    backends' kernels: StatsKernels.probe_roundings)."""

    def __init__(self, st: Stats, mkn: Tuple[int, int, int], criterion: str, exact=(False, False),
                 probe_roundings: Optional[int] = None, probe_on_b: bool = False):
        self.st, self.criterion = st, criterion
        self.m, self.k, self.n = mkn
        self.exact = tuple(exact)
        self.probe_roundings = xla_probe_roundings(self.k) if probe_roundings is None else int(probe_roundings)
        # Where the probe's sums y, z, m, q run: per row of A (a column of B
        # probes A), or per column of B (a row of A probes B:
        # ``_rows_probe_of_b``). The bound is the same with A and B^T swapped.
        self.probe_on_b = bool(probe_on_b)

    @classmethod
    def of(cls, a, b, s: Auto, exact=(False, False), kernels: Optional[backends.StatsKernels] = None,
           ranges_only: bool = False, b_stats=None) -> "DataTest":
        """The test of a (B, M, K) x (B, K, N); ``ranges_only``: for the
        exponent ranges alone (bf16x6_ok, classes), with the bounds of an
        exact operand instead of a pass over it (operand_stats); ``b_stats``:
        B's column statistics taken ahead, or None."""
        st = operand_stats(a, b, normwise=s.criterion == "normwise" and not ranges_only, kernels=kernels,
                           exact=exact if ranges_only else (False, False), b_stats=b_stats)
        k = a.shape[2]
        return cls(st, (a.shape[1], k, b.shape[2]), s.criterion, exact,
                   kernels.probe_roundings(k) if kernels else None)

    @classmethod
    def with_split(cls, a, b, s: Auto, kernels: Optional[backends.StatsKernels], b_stats=None,
                   probe_b: bool = False):
        """The normwise test of a (B, M, K) x (B, K, N) with A's statistics
        taken by fp16x3's split of A (``operand_stats_with_split``; ``probe_b``:
        the probe on B's side): (the test, that split), or None where it
        cannot run."""
        got = operand_stats_with_split(a, b, kernels, b_stats, probe_b) if s.criterion == "normwise" else None
        if got is None:
            return None
        st, split = got
        k = a.shape[2]
        return cls(st, (a.shape[1], k, b.shape[2]), s.criterion, (False, False), kernels.probe_roundings(k),
                   probe_on_b=probe_b), split

    def like(self, st: Stats) -> "DataTest":
        """The same test (shape, criterion, probe) on ``st``: in a conditional's
        branch, from the statistics passed into it."""
        return DataTest(st, (self.m, self.k, self.n), self.criterion, self.exact, self.probe_roundings,
                        self.probe_on_b)

    @functools.cached_property
    def classes(self):
        return _classes_from(self.st)

    @functools.cached_property
    def bf16x6_ok(self):
        ca, cb = self.classes
        return jnp.maximum(ca.max(initial=0), cb.max(initial=0)) <= 1

    # -- normwise: E <= 2^BUDGET_EXP ||C||_F, in each batch element --------
    @functools.cached_property
    def _scaled(self) -> "_Scaled":
        st = self.st
        ea = exponent(jnp.max(st.a_l1, axis=1, initial=0.0))[:, None]
        # (st.eb: the exponent of the probe vector's sum, B's largest column
        # sum; with the probe on B's side A's largest row sum, so B's is
        # found here.)
        eb = exponent(jnp.max(st.b_l1, axis=1, initial=0.0))[:, None] if self.probe_on_b else st.eb[:, None]
        fa, la = (ldexp(x, -ea) for x in (st.a_max, st.a_l1))
        fb, lb = (ldexp(x, -eb) for x in (st.b_max, st.b_l1))
        # The probe's sums are in the units of the side they ran over (the
        # probe vector itself is scaled by the other side's exponent).
        y, z, mx = (ldexp(x, -(eb if self.probe_on_b else ea)) for x in (st.y, st.z, st.m))
        # A lower bound on ||A b_j|| (B,) (or ||a_i B||): the probe's rounding
        # is at most 2 probe_roundings u (|A| |b_j|) per entry, and the two
        # norms' (pairwise) at most 2 (ceil(log2 M) + 3) u of them each (N
        # entries with the probe on B's side).
        entries = self.n if self.probe_on_b else self.m
        gamma = 2.0 * (self.probe_roundings + 2 * _tree_roundings(entries) + 2) * UNIT_ROUNDOFF
        low = _norm_pairwise(y) - gamma * _norm_pairwise(z)
        finite = (jnp.all(jnp.isfinite(st.a_l1), axis=1) & jnp.all(jnp.isfinite(st.b_l1), axis=1)
                  & jnp.all(jnp.isfinite(st.y), axis=1) & jnp.all(jnp.isfinite(st.z), axis=1))
        # E 2^-(ea+eb) 2^50 is compared with 2^(BUDGET_EXP + 50) ||C|| 2^-(ea+eb).
        rhs = jnp.where(finite, 2.0 ** (BUDGET_EXP - FP16X3_FLOOR_EXP) * low, -jnp.inf)
        # Products that matter per entry of the probed column: each counts
        # (|a_ik v_k| / m_i)^(1/8); rows weigh m_i^2 (zero rows: no weight).
        per_row = jnp.where(st.m > 0, st.q / _root8(jnp.where(st.m > 0, st.m, 1.0)), jnp.inf)
        return _Scaled(fa, la, fb, lb, rhs, per_row, mx * mx)

    def _lhs(self, nfa, nla, nfb, nlb):
        """E 2^-(ea+eb) 2^50 from the norms of the scaled vectors; E's own FP32
        sums are covered by the factor 2. The first term is A's representation
        error against |B|, the second B's against |A|: an exact operand
        (small integers: FloatSplit.exact) has none."""
        ea, eb = self.exact
        return 2.0 * ((0.0 if ea else nfa * nlb) + (0.0 if eb else nla * nfb))

    @staticmethod
    def _terms(w, wq):
        return jnp.where(w > 0, wq / jnp.where(w > 0, w, 1.0), jnp.inf)

    @functools.cached_property
    def normwise_ratio(self):
        """E over its budget 2^BUDGET_EXP ||C||_F (lower bound), per batch
        element: <= 1 passes."""
        v = self._scaled
        lhs = self._lhs(_norm(v.fa), _norm(v.la), _norm(v.fb), _norm(v.lb))
        return jnp.where(lhs == 0, 0.0, jnp.where(v.rhs > 0, lhs / v.rhs, jnp.inf))

    @functools.cached_property
    def terms(self):
        """Per batch element: about how many products make up an entry of the
        probed column of C (1: one product dominates; see MIN_TERMS)."""
        v = self._scaled
        return self._terms(jnp.sum(v.w, axis=1), jnp.sum(jnp.where(v.w > 0, v.w * v.per_row, 0.0), axis=1))

    @functools.cached_property
    def fp16x3_ok(self):
        if self.criterion == "componentwise":
            ca, cb = self.classes
            return jnp.maximum(ca.max(initial=0), cb.max(initial=0)) <= 0
        return jnp.all(self.normwise_ratio <= 1.0) & jnp.all(self.terms >= MIN_TERMS)

    # -- hybrids ------------------------------------------------------------
    @functools.cached_property
    def order(self):
        """Permutations (B, M), (B, N) putting the rows of A and columns of B
        most fit for fp16x3 first (stable: ties keep their index order)."""
        if self.criterion == "componentwise":
            keys = self.classes
        else:  # each row's (column's) share of E with the other side whole; rows of few terms last
            v = self._scaled
            rows = v.fa * _norm(v.lb)[:, None] + v.la * _norm(v.fb)[:, None]
            cols = _norm(v.fa)[:, None] * v.lb + _norm(v.la)[:, None] * v.fb
            few = ~(v.per_row >= MIN_TERMS)  # (the side the probe ran over: its entries of few terms last; NaN too)
            keys = (rows, jnp.where(few, jnp.inf, cols)) if self.probe_on_b else (jnp.where(few, jnp.inf, rows), cols)
        return tuple(jnp.argsort(x, axis=1, stable=True) for x in keys)

    @functools.cached_property
    def _prefix(self):
        """Cumulative sums in ``order`` of the squares of the scaled vectors,
        and of the rows' term-count weights."""
        v = self._scaled
        pa, pb = self.order
        cum = lambda x, p: jnp.cumsum(jnp.take_along_axis(x, p, axis=1), axis=1)  # noqa: E731
        wq = jnp.where(v.w > 0, v.w * v.per_row, 0.0)
        pt = pb if self.probe_on_b else pa  # the term counts' side
        return (cum(v.fa * v.fa, pa), cum(v.la * v.la, pa), cum(v.fb * v.fb, pb), cum(v.lb * v.lb, pb),
                cum(v.w, pt), cum(wq, pt))

    def hybrids_ok(self, rows, cols):
        """For each pair (rows[h], cols[h]): fp16x3 on the first ``rows[h]``
        rows x ``cols[h]`` columns in ``order`` (every batch element), bf16x6
        on the rest of C; one vectorized test for all the hybrids (H,)."""
        rows, cols = np.asarray(rows), np.asarray(cols)
        if self.criterion == "componentwise":
            ca, cb = self.classes

            def enough(c, need):  # at least ``need`` fp16-safe rows in every batch element
                return (c == 0).sum(axis=1).min(initial=c.shape[1]) >= need
            return self.bf16x6_ok & enough(ca, rows) & enough(cb, cols)
        cfa, cla, cfb, clb, cw, cwq = self._prefix
        p, q = rows - 1, cols - 1                                          # (B, H) below
        lhs = self._lhs(jnp.sqrt(cfa[:, p]), jnp.sqrt(cla[:, p]), jnp.sqrt(cfb[:, q]), jnp.sqrt(clb[:, q]))
        t = q if self.probe_on_b else p
        terms = self._terms(cw[:, t], cwq[:, t])
        return (self.bf16x6_ok & jnp.all(lhs <= self._scaled.rhs[:, None], axis=0)
                & jnp.all(terms >= MIN_TERMS, axis=0))

    def hybrid_ok(self, rows: int, cols: int):
        """fp16x3 on the first ``rows`` rows x ``cols`` columns in ``order``
        (every batch element), bf16x6 on the rest of C."""
        return self.hybrids_ok([rows], [cols])[0]

    def allows(self, cand: Candidate):
        if cand.hybrid:
            return self.hybrid_ok(cand.rows, cand.cols)
        return {"fp16x3": lambda: self.fp16x3_ok, "bf16x6": lambda: self.bf16x6_ok,
                "fp32": lambda: jnp.bool_(True)}[cand.scheme]()

    def allowed(self, candidates):
        """``allows`` of each candidate, stacked (the hybrids tested together)."""
        hyb = [i for i, c in enumerate(candidates) if c.hybrid]
        ok_h = self.hybrids_ok([candidates[i].rows for i in hyb], [candidates[i].cols for i in hyb]) if hyb else None
        return jnp.stack([ok_h[hyb.index(i)] if c.hybrid else self.allows(c) for i, c in enumerate(candidates)])

    # -- carrying the test into a conditional's branch ------------------------
    _CARRIED = ("classes", "_scaled")

    def computed(self) -> Dict[str, object]:
        """The parts of the test computed so far (a pytree of arrays): passed
        into a conditional's branch with ``Stats`` and given to ``resume``
        there, they are not traced and computed a second time."""
        return {k: self.__dict__[k] for k in self._CARRIED if k in self.__dict__}

    def resume(self, computed: Dict[str, object]) -> "DataTest":
        self.__dict__.update(computed)
        return self


def _panel_classes(row_cls, block: int):
    """Highest class per panel of ``block`` rows (B, R) -> (B, ceil(R / block))."""
    bsz, r = row_cls.shape
    pad = (-r) % block
    c = jnp.pad(row_cls, ((0, 0), (0, pad)))
    return c.reshape(bsz, (r + pad) // block, block).max(axis=2)


def block_counts(row_cls, col_cls, s: Auto):
    """Output-block counts (n_fp16, n_bf16, n_fp32) from the classes of A's
    rows and B's columns (componentwise criterion).

    A row panel (``s.block`` rows of A) and a column panel of B are each
    classified; an output block needs the higher class of its two panels.
    APE counts blocks with the mask product mask_C = mask_A x mask_B; with
    whole rows as the scaling unit, K collapses and the product is an outer
    product of the panel masks.
    """
    ca = _panel_classes(row_cls, s.block)                                 # (B, Mb)
    cb = _panel_classes(col_cls, s.block)                                 # (B, Nb)
    need = jnp.maximum(ca[:, :, None], cb[:, None, :])                    # mask_A x mask_B
    return tuple((need == c).sum().astype(jnp.int32) for c in (0, 1, 2))


def _assemble(cand: Candidate, a, b, order, inverse, product: Callable, take_a, take_b):
    """A hybrid's C from its products: fp16x3 on the top-left p x q block of
    C in ``order``, cand.scheme on the rest, rows and columns back in place
    (``inverse``: the inverse permutations). ``take_a(a, scheme, rows)``
    gives the operand of a product from A's rows ``rows`` (a slice of
    ``order[0]``, or None: all of them, unpermuted), ``take_b`` likewise
    from B's columns."""
    m, n, p, q = order[0].shape[1], order[1].shape[1], cand.rows, cand.cols
    row_perm, col_perm = order
    # The rows and columns most fit for fp16x3 first; a side not split
    # (p = M or q = N) is left as it is.
    top = row_perm[:, :p] if p < m else None
    left, right = (col_perm[:, :q], col_perm[:, q:]) if q < n else (None, None)
    fp16x3, rest = get_scheme("fp16x3"), get_scheme(cand.scheme)
    c = product(take_a(a, fp16x3, top), take_b(b, fp16x3, left), fp16x3)
    if q < n:
        c = jnp.concatenate([c, product(take_a(a, rest, top), take_b(b, rest, right), rest)], axis=2)
    if p < m:
        bottom = product(take_a(a, rest, row_perm[:, p:]), take_b(b, rest, col_perm if q < n else None), rest)
        c = _take(jnp.concatenate([c, bottom], axis=1), inverse[0], 1)  # rows back in place
    if q < n:
        c = _take(c, inverse[1], 2)  # columns back in place
    return c


def _take(x, idx, axis: int):
    """x's entries ``idx`` (B, r) along ``axis`` (x: (B, R, C)), or x where idx is None."""
    return x if idx is None else xla.take_along(x, idx, axis)


def _run(cand: Candidate, a, b, order, inverse, product: Callable):
    """One candidate through the backends' products (each product splits its
    operands and applies FP32's special values itself)."""
    if not cand.hybrid:
        return product(a, b, get_scheme(cand.scheme))
    return _assemble(cand, a, b, order, inverse, product,
                     lambda a, s, rows: _take(a, rows, 1), lambda b, s, cols: _take(b, cols, 2))


def _run_pure(cand: Candidate, product: Callable, a, b, *unused):
    return product(a, b, get_scheme(cand.scheme))


def _run_split(cand: Candidate, splits, order, inverse, split: SplitProduct):
    """A hybrid from operands split once (``_hybrids_shared``): each product
    takes the split of its rows and columns."""
    return _assemble(cand, splits, splits, order, inverse, split.product,
                     lambda sp, s, rows: sp[s.name][0] if rows is None else split.rows(sp[s.name][0], rows),
                     lambda sp, s, cols: sp[s.name][1] if cols is None else split.cols(sp[s.name][1], cols))


def _hybrids_shared(hybrids, a, b, order, inverse, which, split: SplitProduct, platform: str):
    """The hybrid ``hybrids[which]``, as its products through the backend
    would compute it, with the work that they would each repeat done once
    for all the hybrids: the split of A and B for each scheme (of their
    finite parts), and FP32's special values (on the whole C: where they
    change an entry depends on its row and column only). A hybrid's
    products are then their slice products alone, and the compiled program
    holds the splits once, not once per product of every hybrid (issue 13)."""
    a, b = _wide(a), _wide(b)  # (an exact operand may come in 16 bits)
    a0, b0, _, _ = xla.finite_parts(a, b)
    splits = {name: split.split(a0, b0, get_scheme(name))
              for name in dict.fromkeys(["fp16x3"] + [c.scheme for c in hybrids])}
    branches = [functools.partial(_run_split, c, split=split) for c in hybrids]

    def product(a0, b0):  # (of the splits of a0, b0 above)
        return branches[0](splits, order, inverse) if len(hybrids) == 1 else \
            lax.switch(which, branches, splits, order, inverse)
    return xla.fp32_special_values(product, a, b, platform)


# auto's choice on the device (docs/auto.md, "The choice on the device";
# backends.GatedProduct, opt-in: JAXEMU_CUDA_DEVICE_CHOICE): on products of
# up to this many flops (2 B M N K), where the conditional's host round trip
# weighs (H200, stop 59: auto over fp16x3 1.31-1.50 at 2048^3 with it,
# 1.02-1.05 with its choice not acted on; ~1 % at 8192^3, where the
# conditional keeps the hybrids). 4096^3 and 8 x 2048^3 (1.4e11 flops each)
# are within, 8192^3 (1.1e12) is not. Provisional: to be set from the gated
# form's own measurements.
DEVICE_CHOICE_MAX_FLOPS = 4e11


def device_choice(candidates, shape, gated) -> Optional[Tuple[Candidate, ...]]:
    """The candidates auto runs behind gates instead of a conditional (in
    its plan's order: the test's choice is the first it allows), or None:
    no gated products (``gated`` None: the backend has none, or the switch
    is off), fp16x3 not first, a product past DEVICE_CHOICE_MAX_FLOPS, or a
    candidate the backend cannot run gated. The hybrids are left out (their
    gathers are XLA's, which read no gate): where today's test would pick a
    hybrid, the next pure candidate runs."""
    bsz, m, n, k = shape
    if gated is None or 2.0 * bsz * m * n * k > DEVICE_CHOICE_MAX_FLOPS or candidates[0].hybrid:
        return None
    pures = tuple(c for c in candidates if not c.hybrid)
    names = [c.scheme for c in pures]
    if names[0] != "fp16x3" or "fp32" not in names:
        return None
    pures = pures[:names.index("fp32") + 1]  # (FP32 is always allowed: none after it is chosen)
    return pures if all(gated.runs(c.scheme, shape) for c in pures) else None


def choice_index(candidates, test: DataTest):
    """Index in ``candidates`` (sorted by time) of the first one the test
    allows (the last one, fp32, is always allowed)."""
    return jnp.argmax(test.allowed(candidates))


def _choose(candidates, a, b, test: DataTest, product: Callable, platform: str, split: Optional[SplitProduct]):
    # Branches get arrays as operands, not closures over tracers (JAX may
    # cache the branch functions).
    hybrids = [i for i, c in enumerate(candidates) if c.hybrid]
    order = inverse = None
    if hybrids:
        order = test.order
        inverse = tuple(jnp.argsort(x, axis=1) for x in order)  # computed once, not per branch
    if len(candidates) == 1:
        return _run(candidates[0], a, b, order, inverse, product)
    index = choice_index(candidates, test)
    if split is None or not hybrids:
        branches = [functools.partial(_run, c, product=product) for c in candidates]
        return xla.one_of(index, branches, (a, b, order, inverse), xla.product_shape(a, b))
    # One branch per pure candidate, one for all the hybrids (they share
    # their operands' splits): branch and hybrid of each candidate index.
    pures = [i for i, c in enumerate(candidates) if not c.hybrid]
    branch = np.array([pures.index(i) if i in pures else len(pures) for i in range(len(candidates))], np.int32)
    which = np.array([hybrids.index(i) if i in hybrids else 0 for i in range(len(candidates))], np.int32)
    branches = [functools.partial(_run_pure, candidates[i], product) for i in pures]
    branches.append(functools.partial(_hybrids_shared, tuple(candidates[i] for i in hybrids), split=split,
                                      platform=platform))
    return xla.one_of(jnp.asarray(branch)[index], branches, (a, b, order, inverse, jnp.asarray(which)[index]),
                      xla.product_shape(a, b))


def auto_dot(a, b, s: Auto, platform: str, product: Callable, backend: str = "xla",
             split: Optional[SplitProduct] = None, exact=(False, False), presplit=(None, None), b_stats=None):
    """The auto scheme on canonical f32 operands a (B, M, K), b (B, K, N)
    (may contain NaN/Inf). ``product(a, b, scheme)`` is the backends'
    concrete product (jaxemu.backends.product_for), ``backend`` the name of
    the backend it runs the emulated schemes on (for the cost model);
    ``split``: that backend's product in two steps (backends.split_product_for),
    with which the hybrids split the operands once for all their products
    (the same numbers, a smaller program), or None: each product on its own;
    ``exact``: operands known to hold small integers (jaxemu_dot's flags):
    the float schemes run their one-slice variants (the same result for
    fewer products), costed and tested as such; ``presplit``: an operand's
    fp16x3 split made ahead (outside a loop, jaxemu/hoist.py), which
    fp16x3 reads where auto runs it (the backends' Product protocol);
    ``b_stats``: B's ``column_stats`` taken ahead (jaxemu/hoist.py), read
    where the backend's statistics kernels take them (elsewhere XLA's
    reductions run here, as without it, and XLA deletes the hoisted ones)."""
    bsz, m, k = a.shape
    n = b.shape[2]
    kernels = None if backend == "xla" else backends.stats_for(s, platform)
    if a.size == 0 or b.size == 0:
        return product(a, b, get_scheme("fp32"))
    if any(exact):
        full_product = product

        def product(a, b, sc, scales=None, fits=False):
            return full_product(_wide(a), _wide(b), exact_variant(sc, exact), scales, fits)
    pl = plan(bsz, m, n, k, s, platform, backend, exact=exact)
    ahead = {} if presplit == (None, None) else {"presplit": presplit}
    if pl.static:
        return product(a, b, get_scheme(pl.static), **(ahead if pl.static == "fp16x3" else {}))
    # An exact operand enters the test and the conditional in 16 bits (exact:
    # |x| <= 256), in the slice format of the fastest candidate: an operand of
    # a conditional is written to memory whichever branch runs, in float32
    # twice the bytes of the slice the product reads (a 1M x 1024 one-hot:
    # 4 GiB; docs/performance.md, stops 24-25). In float32 where the fastest
    # runs on the FP32-operand kernel, which reads it so. (A test of the
    # ranges alone does not read it: ``ranges_only``.)
    narrow = _exact_format(pl.candidates, lambda c: costs.path_of(backend, c.scheme, (bsz, m, n, k), exact))
    a, b = (x.astype(narrow) if e else x for x, e in zip((a, b), exact))
    first, rest = pl.candidates[0], pl.candidates[1:]
    b_stats = b_stats if kernels is not None else None
    fp16x3_first = first.scheme == "fp16x3" and not first.hybrid
    # The choice on the device (opt-in: device_choice), where it applies,
    # replaces the conditional below.
    gated = (backends.gated_for(platform, backend)
             if fp16x3_first and presplit == (None, None) and not any(exact) else None)
    on_device = device_choice(pl.candidates, (bsz, m, n, k), gated)
    # Where fp16x3 comes first, A's statistics can come from fp16x3's split
    # of A, which its branch then reads: one read of A for both
    # (JAXEMU_CUDA_SPLIT_STATS, cuda_fused.split_takes_stats).
    fused = (DataTest.with_split(a, b, s, kernels, b_stats, probe_b=probe_on_b(m, n))
             if fp16x3_first and not any(exact) and presplit[0] is None and on_device is None else None)
    if fused is not None:
        test, a_split = fused
        ahead = {"presplit": (a_split, presplit[1])}
    else:
        test = DataTest.of(a, b, s, exact, kernels, pl.ranges_only, b_stats=b_stats)
    if not fp16x3_first:
        return _choose(pl.candidates, a, b, test, product, platform, split)
    if on_device is not None:
        # Every candidate launched, each behind a gate that only the test's
        # choice opens; C passes from one to the next. fp16x3 takes its row
        # scaling from the test's maxima, as in the conditional's branch.
        choice = choice_index(on_device, test).astype(jnp.int32)
        scales = backends.row_scales(test.st.a_max, test.st.b_max)
        c = None
        for i, cand in enumerate(on_device):
            c = gated.product(a, b, cand.scheme, choice, i, c, scales if cand.scheme == "fp16x3" else None)
        return c
    # The common case costs one conditional; the hybrids' sorts run only
    # when fp16x3 is refused. The same statistics tell whether FP32's
    # special-value rules can change C (Stats.fits): on finite data that
    # cannot overflow, fp16x3 runs without the special-value conditional of
    # its own (one device-to-host copy and launch gap fewer: ~30-60 us on an
    # H100, docs/performance.md, stop 27).
    index = jnp.where(test.fp16x3_ok, jnp.where(test.st.fits(k), 2, 1), 0).astype(jnp.int32)

    def refused(a, b, st, computed, ahead):
        return _choose(rest, a, b, test.like(st).resume(computed), product, platform, split)

    # fp16x3 takes its row scaling from the test's maxima (the same
    # exponents): one pass over each operand fewer than on its own.
    fp = get_scheme("fp16x3")

    def fp16x3(a, b, st, computed, ahead, fits=False):
        return product(a, b, fp, backends.row_scales(st.a_max, st.b_max), fits, **ahead)

    return xla.one_of(index, [refused, fp16x3, functools.partial(fp16x3, fits=True)],
                      (a, b, test.st, test.computed(), ahead), xla.product_shape(a, b))


def _wide(x):
    """An operand back in float32 (a narrowed exact one: ``_exact_format``)."""
    return x.astype(jnp.float32)


def _exact_format(candidates, path_of=lambda c: ""):
    """The format in which exact operands (small integers, exact in 16 bits)
    enter auto's test and conditional: that of the fastest emulated
    candidate, fp16 for fp16x3 and the hybrids, bf16 for bf16x6 on the slice
    path, float32 on a kernel path that reads FP32 operands (``path_of(c)``
    == "f32": costs.path_of)."""
    for c in candidates:
        if c.hybrid or c.scheme == "fp16x3":
            return jnp.float16
        if c.scheme != "fp32":
            if path_of(c) == "f32":
                return jnp.float32
            return jnp.float16 if get_scheme(c.scheme).fmt == "fp16" else jnp.bfloat16
    return jnp.float16


def auto_report(a, b, scheme="auto", platform: Optional[str] = None) -> Dict[str, object]:
    """What ``auto`` does for 2-D operands a (m, k) and b (k, n) on
    ``platform`` (default: JAX's default backend): the plan it runs
    ("fp16x3", "bf16x6", "fp32" or a hybrid "fp16x3+bf16x6", with ``split``
    the size of the block of C given to fp16x3), why, the data test
    (``test``: its criterion and, for "normwise", ``ratio``: the bound on
    the error fp16x3's lost bits would add over its budget, <= 1 passes,
    and ``terms``: the products per entry, >= MIN_TERMS passes), the
    output-block counts per class (componentwise criterion), the cost
    model used, and ``on_device``: whether auto chooses on the device
    (JAXEMU_CUDA_DEVICE_CHOICE=1, ``device_choice``: no hybrids, the next
    pure candidate instead)."""
    import jax

    s = get_scheme(scheme)
    if not isinstance(s, Auto):
        raise ValueError(f"auto_report needs an auto scheme, got {s.name!r}")
    platform = platform or jax.default_backend()
    a = jnp.asarray(a, jnp.float32)[None]
    b = jnp.asarray(b, jnp.float32)[None]
    pl = plan(1, a.shape[1], b.shape[2], a.shape[2], s, platform, backend_for(s, platform))
    if pl.static:
        return dict(scheme=pl.static, reason=pl.reason, test=None, blocks=None, split=None,
                    cost_model=pl.cost_source, on_device=False)
    test = DataTest.of(a, b, s)
    on_device = device_choice(pl.candidates, (1, a.shape[1], b.shape[2], a.shape[2]),
                              backends.gated_for(platform, backend_for(s, platform)))
    cands = on_device or pl.candidates
    cand = cands[int(choice_index(cands, test))]
    info = dict(criterion=s.criterion, fp16x3=bool(test.fp16x3_ok))
    blocks = None
    if s.criterion == "normwise":
        info["ratio"] = float(test.normwise_ratio[0])
        info["terms"] = float(test.terms[0])
    else:
        n16, n6, n32 = (int(x) for x in block_counts(*test.classes, s))
        blocks = dict(fp16x3=n16, bf16x6=n6, fp32=n32)
    split = dict(rows=cand.rows, cols=cand.cols, of=(a.shape[1], b.shape[2])) if cand.hybrid else None
    return dict(scheme=cand.label, reason=pl.reason, test=info, blocks=blocks, split=split,
                cost_model=pl.cost_source, on_device=on_device is not None)
