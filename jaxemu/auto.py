"""The "auto" scheme (APE's adapter): the fastest scheme the data allow.

auto sits above the backends: the primitive hands it a concrete product
``product(a, b, scheme)`` (jaxemu.backends), and auto composes fp16x3,
bf16x6 and FP32 products of it. Nothing below this module imports it.

1. Classify (at run time) each row of A and column of B, the unit of
   fp16x3's power-of-two scaling:
     class 0 "fp16": nonzero exponents within FP16_SPREAD binades and far from
       the f32 range ends: fp16x3 keeps 22+ bits of every value after scaling;
     class 1 "bf16": away from the f32 range ends: bf16x6 is exact;
     class 2 "fp32": values beyond 2^100 or below 2^-100, where slices or
       their residuals under- or overflow -- or values whose products with
       the other operand's would leave FP32's normal range: bf16x6 does not
       scale, so its smallest slice products sit 2^-16 below the product and
       are flushed where FP32's own product is still normal (a row at 2^-60
       times a column at 2^-60), and a slice rounded up can overflow where
       the product does not (2^64 - ulp squared). Each row is paired with the
       smallest (largest) exponent of the whole other operand, so every pair
       of rows and columns that is not class 2 is safe.
   An output element needs the higher class of its row and column. The
   fp16 test is strict on purpose: one value 2^-25 below its row's maximum
   would lose bits in fp16x3, and only its partner in B decides whether that
   matters, so auto assumes it does.
2. Candidates (static, per shape): pure fp32, fp16x3, bf16x6, and hybrids
   (APE's block-wise hybrid at row/column granularity): A's fp16-safe rows
   and B's fp16-safe columns are gathered to the front; the top-left p x q
   block of C runs fp16x3, the rest bf16x6 (two or three products). One-sided
   splits (q = N or p = M) at 1/4, 1/2, 3/4 of M (N), two-sided ones at 1/2
   and 3/4, in multiples of ``block``. Gathering instead of masking tiles
   means no scheme computes a block it does not keep, on any backend.
3. Each candidate's time comes from the device's cost model (costs.py:
   calibrated or shipped per GPU model); without one, from slice-product
   counts plus the size thresholds ``min_flops`` / ``min_dim``. Emulated
   candidates predicted slower than 0.9 x FP32 are dropped, so that auto is
   never meant to lose to SGEMM; if none is left, auto is native FP32 for
   that shape, decided at trace time and reported by ``explain``.
4. At run time, the fastest candidate whose constraints the classes meet
   runs (lax.switch: only the chosen branch executes). FP32 is always
   allowed, so every input has a safe branch.
NaN/Inf need no class of their own: every scheme reproduces FP32's NaN/Inf
pattern (backends/xla.py).
Known limit: fp16x3 keeps 22-23 significant bits per value, so at very small
K (below ~32, where FP32 makes few roundings) its error can reach ~3x FP32's.
auto never emulates such products by default: the size thresholds need
K >= 2048, and the H200 cost model predicts FP32 faster for K <= 128 at any
M = N up to 32768.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple

import jax.numpy as jnp
from jax import lax

from . import costs
from .backends import backend_for
from .backends.xla import exponent
from .schemes import Auto, get_scheme

# fp16x3 keeps full precision for values within ~26 binades below their row's
# maximum (hi and lo stay normal in fp16 after scaling the maximum to
# [2^13, 2^14)); 24 leaves a margin.
FP16_SPREAD = 24
# Exponent window in which bf16/fp16 slices and their residuals stay normal
# and partial sums cannot overflow.
SAFE_MIN_EXP = -100
SAFE_MAX_EXP = 100
# Window for the exponent sum of a value of A and a value of B: bf16x6's
# lowest slice products (2^-16 below) stay normal down to a sum of -110, and
# slices rounded up cannot overflow below 126; margins of 10 and 2.
PAIR_MIN_EXP = -100
PAIR_MAX_EXP = 124
# Emulation must be predicted at least this much faster than FP32 to be tried
# (the cost model's error and the class scan's cost are the margin).
PAYS = 0.9
SPLIT_FRACTIONS = (0.25, 0.5, 0.75)   # one-sided hybrids
BOTH_FRACTIONS = (0.5, 0.75)          # two-sided: fewer, each one is a branch to compile

CHOICES = ("fp16x3", "bf16x6", "fp32")
CLASS = {name: i for i, name in enumerate(CHOICES)}


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One way to run a (M, K) x (K, N) product: fp16x3 on the first ``rows``
    fp16-safe rows of A times the first ``cols`` fp16-safe columns of B, and
    ``scheme`` on the rest of C; ``hybrid=False``: ``scheme`` on all of C."""

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


def plan(bsz: int, m: int, n: int, k: int, s: Auto, platform: Optional[str] = None,
         backend: Optional[str] = None, model=None) -> AutoPlan:
    """The candidates auto considers for a (bsz, m, k) x (bsz, k, n) product
    on ``platform`` with ``backend`` running the emulated schemes; ``model``
    (a costs.CostModel) overrides the device's, e.g. to ask what auto would
    do on another GPU."""
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

        def cost(name, b, mm, nn, kk):
            return 2.0 * b * mm * nn * kk * costs.product_weight(name)

        def gather(rows, cols):
            return 0.0
    else:
        source = model.source

        def cost(name, b, mm, nn, kk):
            return model.time(name, (b, mm, nn, kk))

        def gather(rows, cols):
            return model.gather_time(shape, rows, cols)
    t32 = cost("fp32", *shape)
    cands = [Candidate(name, cost(name, *shape)) for name in CHOICES]
    for p, q in _hybrid_splits(m, n, s.block):
        # fp16x3 on C[:p, :q]; bf16x6 on C[:p, q:] and C[p:, :] (empty parts cost nothing)
        t = cost("fp16x3", bsz, p, q, k) + gather(p < m, q < n)
        t += cost("bf16x6", bsz, p, n - q, k) if q < n else 0.0
        t += cost("bf16x6", bsz, m - p, n, k) if p < m else 0.0
        cands.append(Candidate("bf16x6", t, True, p, q))
    t6 = cands[1].time
    keep = [c for c in cands if (c.scheme == "fp32" and not c.hybrid)
            or (c.time <= PAYS * t32 and (not c.hybrid or c.time < t6))]
    keep.sort(key=lambda c: c.time)
    if len(keep) == 1:
        best = min(cands[:2], key=lambda c: c.time)  # the faster pure emulation
        return AutoPlan(tuple(keep), f"the cost model predicts {best.scheme} {best.time * 1e3:.3g} ms against "
                        f"FP32's {t32 * 1e3:.3g} ms: emulation does not pay here", source)
    return AutoPlan(tuple(keep), "the fastest candidate the data allow, chosen at run time", source)


def _row_exponents(x):
    """(nonzero, smallest exponent, largest exponent) of each row of canonical
    x (B, R, C) over its finite values; each (B, R)."""
    ax = jnp.abs(jnp.where(jnp.isfinite(x), x, 0.0))
    amax = jnp.max(ax, axis=2, initial=0.0)
    amin = jnp.min(jnp.where(ax > 0, ax, jnp.inf), axis=2, initial=jnp.inf)
    return amax > 0, exponent(jnp.where(jnp.isinf(amin), amax, amin)), exponent(amax)


def classes(a, b):
    """Class (0, 1, 2) of each row of canonical a (B, M, K) and each column of
    b (B, K, N): (B, M) and (B, N).

    A row passes the pair test against the smallest and largest exponents of
    the other operand's rows that pass their own window (the others are
    class 2, so their pairs run FP32 anyway). If rows i and j both pass,
    e_i + e_j is within [PAIR_MIN_EXP, PAIR_MAX_EXP] for all their values.
    Conservative: one tiny value in a row pairs with the other operand's
    tiniest, whether or not they meet in a product."""
    sides = [_row_exponents(a), _row_exponents(jnp.swapaxes(b, 1, 2))]
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


def _panel_classes(row_cls, block: int):
    """Highest class per panel of ``block`` rows (B, R) -> (B, ceil(R / block))."""
    bsz, r = row_cls.shape
    pad = (-r) % block
    c = jnp.pad(row_cls, ((0, 0), (0, pad)))
    return c.reshape(bsz, (r + pad) // block, block).max(axis=2)


def block_counts(row_cls, col_cls, s: Auto):
    """Output-block counts (n_fp16, n_bf16, n_fp32) from the classes of A's
    rows and B's columns (``classes``).

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


def _allowed(cand: Candidate, ca, cb):
    """Whether the row classes ca (B, M) and column classes cb (B, N) allow ``cand``."""
    worst = CLASS[cand.scheme]
    if not cand.hybrid:
        return jnp.maximum(ca.max(initial=0), cb.max(initial=0)) <= worst

    def enough(c, need):  # at least ``need`` fp16-safe rows in every batch element
        return (c == 0).sum(axis=1).min(initial=c.shape[1]) >= need
    return (ca.max(initial=0) <= worst) & (cb.max(initial=0) <= worst) & enough(ca, cand.rows) & enough(cb, cand.cols)


def _run(cand: Candidate, a, b, ca, cb, product):
    def dot(x, y, name):
        return product(x, y, get_scheme(name))
    if not cand.hybrid:
        return dot(a, b, cand.scheme)
    m, n, p, q = a.shape[1], b.shape[2], cand.rows, cand.cols
    # fp16-safe rows of A and columns of B first (stable sorts keep their order);
    # a side not split (p = M or q = N) is left as it is.
    if p < m:
        row_perm = jnp.argsort(ca, axis=1, stable=True)
        a = jnp.take_along_axis(a, row_perm[:, :, None], axis=1)
    if q < n:
        col_perm = jnp.argsort(cb, axis=1, stable=True)
        b = jnp.take_along_axis(b, col_perm[:, None, :], axis=2)
    c = dot(a[:, :p], b[:, :, :q], "fp16x3")
    if q < n:
        c = jnp.concatenate([c, dot(a[:, :p], b[:, :, q:], cand.scheme)], axis=2)
    if p < m:
        c = jnp.concatenate([c, dot(a[:, p:], b, cand.scheme)], axis=1)
        c = jnp.take_along_axis(c, jnp.argsort(row_perm, axis=1)[:, :, None], axis=1)  # rows back in place
    if q < n:
        c = jnp.take_along_axis(c, jnp.argsort(col_perm, axis=1)[:, None, :], axis=2)  # columns back in place
    return c


def choice_index(pl: AutoPlan, ca, cb):
    """Index in ``pl.candidates`` of the fastest candidate the classes allow
    (candidates are sorted by time; fp32 is always allowed)."""
    ok = jnp.stack([_allowed(c, ca, cb) for c in pl.candidates])
    return jnp.argmax(ok)  # the first allowed one


def auto_dot(a, b, s: Auto, platform: str, product, backend: str = "xla"):
    """The auto scheme on canonical f32 operands a (B, M, K), b (B, K, N)
    (may contain NaN/Inf). ``product(a, b, scheme)`` is the backends'
    concrete product (jaxemu.backends.product_for), ``backend`` the name of
    the backend it runs the emulated schemes on (for the cost model)."""
    bsz, m, k = a.shape
    if a.size == 0 or b.size == 0:
        return product(a, b, get_scheme("fp32"))
    pl = plan(bsz, m, b.shape[2], k, s, platform, backend)
    if pl.static:
        return product(a, b, get_scheme(pl.static))
    ca, cb = classes(a, b)
    branches = [lambda a, b, ca, cb, c=c: _run(c, a, b, ca, cb, product) for c in pl.candidates]
    return lax.switch(choice_index(pl, ca, cb), branches, a, b, ca, cb)


def auto_report(a, b, scheme="auto", platform: Optional[str] = None) -> Dict[str, object]:
    """What ``auto`` does for 2-D operands a (m, k) and b (k, n) on
    ``platform`` (default: JAX's default backend): the plan it runs
    ("fp16x3", "bf16x6", "fp32" or a hybrid "fp16x3+bf16x6", with ``split``
    the size of the block of C given to fp16x3), why, the output-block counts per class, and the
    cost model used."""
    import jax

    s = get_scheme(scheme)
    if not isinstance(s, Auto):
        raise ValueError(f"auto_report needs an auto scheme, got {s.name!r}")
    platform = platform or jax.default_backend()
    a = jnp.asarray(a, jnp.float32)[None]
    b = jnp.asarray(b, jnp.float32)[None]
    pl = plan(1, a.shape[1], b.shape[2], a.shape[2], s, platform, backend_for(s, platform))
    if pl.static:
        return dict(scheme=pl.static, reason=pl.reason, blocks=None, split=None, cost_model=pl.cost_source)
    ca, cb = classes(a, b)
    cand = pl.candidates[int(choice_index(pl, ca, cb))]
    n16, n6, n32 = (int(x) for x in block_counts(ca, cb, s))
    split = dict(rows=cand.rows, cols=cand.cols, of=(a.shape[1], b.shape[2])) if cand.hybrid else None
    return dict(scheme=cand.label, reason=pl.reason, blocks=dict(fp16x3=n16, bf16x6=n6, fp32=n32),
                split=split, cost_model=pl.cost_source)
