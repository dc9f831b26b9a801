"""Seeded generator of randomized jaxemu cases and their checks (issue 12).

A *group* is one compiled function: a scheme, operand shapes, dimension
numbers, an entry point (dot_general / dot / matmul) and a transformation
(vmap of jit, grad, jvp, emulate through scan / while / cond). A group runs
a stack of V independent *cases* (each with its own input law) through one
call, so ten thousand cases cost a few hundred compilations. Every case is
checked against the float64 product of its float32 inputs:

  * shape and dtype equal lax.dot_general's;
  * NaN, +Inf and -Inf exactly where the FP32 product has them (entries whose
    FP32 result depends on the summation order, see ``Checker.pattern``, are
    the only exemption and are counted);
  * componentwise error within a bound derived from the scheme's parameters
    (``componentwise_bound``), on every finite entry;
  * on well-scaled laws (jaxemu.testing.LAWS), the documented normwise bound:
    FP32-class schemes within 2x FP32's own error on the same inputs, the
    others within ``Scheme.error_bound()`` (docs/accuracy.md);
  * a rerun of some groups is bit-identical.

The seed: env JAXEMU_TEST_SEED or pytest's --seed (conftest.py prints it);
the case list is a pure function of the seed, so a failure message's seed
and group id reproduce it.
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import List, Optional, Tuple

import numpy as np

import jaxemu
from jaxemu import testing as T

DEFAULT_SEED = 20261124
FLT_MAX = float(np.finfo(np.float32).max)
FLT_MIN = 2.0 ** -126  # smallest normal: XLA's CPU flushes below it
U32 = 2.0 ** -24

WELL_SCALED = T.LAWS  # laws with the documented normwise bounds
EXTREME = ("pow2(+-60)", "near-FLT_MAX", "near-2^64", "tiny", "specials", "mixed")
ALL_LAWS = WELL_SCALED + EXTREME


def float32_schemes():
    """The catalogue's schemes of float32 products (ozaki2_f64 emulates float64
    products, tested with float64 data in test_ozaki.py)."""
    return [n for n in jaxemu.schemes()
            if getattr(jaxemu.get_scheme(n), "operand_dtype", "float32") == "float32"]


def seed_from_env() -> int:
    s = os.environ.get("JAXEMU_TEST_SEED", "")
    return int(s) if s.strip() else DEFAULT_SEED


# ----------------------------------------------------------------------------
# Input laws (float32). The well-scaled ones are jaxemu.testing.sample's.

def sample(law: str, shape, rng: np.random.Generator) -> np.ndarray:
    if law in WELL_SCALED:
        return T.sample(law, shape, rng)
    shape = tuple(shape)
    u = np.array(rng.uniform(-1.0, 1.0, shape), np.float64)  # an array also for shape ()
    rand = lambda: np.array(rng.random(shape))
    if law == "pow2(+-60)":
        # 120 binades: beyond int8's max_spread and fp16's row range.
        x = np.array(u * np.exp2(rng.integers(-60, 60, shape)))
    elif law == "near-FLT_MAX":
        # Mostly small values, a few within a factor 4 of FLT_MAX: products
        # of two of them overflow, of one with a small value do not.
        x = u.copy()
        big = rand() < 0.08
        x[big] = np.sign(u[big]) * FLT_MAX * rng.uniform(0.25, 1.0, int(big.sum()))
    elif law == "near-2^64":
        # 2^64 - j ulp: a bf16/fp16/tf32 slice rounds it up to 2^64, whose
        # square overflows where FP32's (2^64 - ulp)^2 does not.
        x = np.array(u * np.exp2(rng.integers(-4, 4, shape)))
        big = rand() < 0.25
        ulp = 2.0 ** 40
        x[big] = np.sign(u[big]) * (2.0 ** 64 - ulp * rng.integers(1, 4, int(big.sum())))
    elif law == "tiny":
        # Subnormals, values near the smallest normal, and signed zeros.
        x = np.array(u * np.exp2(rng.integers(-149, -110, shape)))
        x[rand() < 0.1] = 0.0
        x[rand() < 0.1] = -0.0
    elif law == "specials":
        x = u.copy()
        r = rand()
        x[r < 0.03] = np.inf
        x[(r >= 0.03) & (r < 0.06)] = -np.inf
        x[(r >= 0.06) & (r < 0.08)] = np.nan
        x[(r >= 0.08) & (r < 0.12)] = 0.0
        x[(r >= 0.12) & (r < 0.16)] = -0.0
        x[(r >= 0.16) & (r < 0.20)] = u[(r >= 0.16) & (r < 0.20)] * 2.0 ** -135  # subnormal
        x[(r >= 0.20) & (r < 0.22)] = FLT_MAX * np.sign(u[(r >= 0.20) & (r < 0.22)])
    elif law == "mixed":
        # Each entry from another law: specials among extreme magnitudes.
        parts = [sample(l, shape, rng) for l in ("pow2(+-60)", "near-FLT_MAX", "tiny", "specials")]
        pick = rng.integers(0, len(parts), shape)
        x = np.array(np.choose(pick, parts))
    else:
        raise ValueError(f"unknown law {law!r}")
    return np.asarray(x, np.float32)


# ----------------------------------------------------------------------------
# Shapes and dimension numbers.

SMALL = (0, 1, 2, 3, 5, 7, 11, 13, 17)
K_SIZES = (0, 1, 2, 7, 17, 31, 64, 97, 127, 129)


@dataclasses.dataclass(frozen=True)
class Group:
    gid: int
    scheme: str
    api: str            # "dot_general", "dot", "matmul"
    transform: str      # "vmap", "jit" (unbatched calls), "jvp", "grad", "scan", "while", "cond"
    lhs_shape: Tuple[int, ...]
    rhs_shape: Tuple[int, ...]
    dn: tuple           # dot_general dimension numbers (for dot/matmul: their equivalent, for checks)
    laws: Tuple[str, ...]   # one per case
    vmap_axis: int = 0  # the stacked axis of the operands (vmap's in_axes)
    rerun: bool = False

    @property
    def k(self) -> int:
        (lc, _), _ = self.dn
        return int(math.prod(self.lhs_shape[d] for d in lc))

    def describe(self) -> str:
        return (f"group {self.gid}: {self.api} {self.transform} scheme={self.scheme} lhs{self.lhs_shape} "
                f"rhs{self.rhs_shape} dn={self.dn} vmap_axis={self.vmap_axis}")


def random_dot_general(rng, max_k: int = 4096, max_out: int = 600):
    """Random ranks, sizes and axis permutations; several batch and
    contracting dims. Returns (lhs_shape, rhs_shape, dn)."""
    nb, nc = int(rng.integers(0, 3)), int(rng.integers(0, 3))
    nlf, nrf = int(rng.integers(0, 3)), int(rng.integers(0, 3))
    pick = lambda n, pool: [int(rng.choice(pool)) for _ in range(n)]
    bs = pick(nb, (1, 2, 3, 5))
    if nc == 1:
        cs = pick(1, K_SIZES)
    else:
        cs = pick(nc, (0, 1, 2, 3, 7, 11, 17) if nc else ())
    lf, rf = pick(nlf, SMALL), pick(nrf, SMALL)
    # Keep the output small: shrink free dims until it fits.
    while math.prod(bs + lf + rf) > max_out:
        big = max(range(len(bs + lf + rf)), key=lambda i: (bs + lf + rf)[i])
        if big < nb:
            bs[big] = max(1, bs[big] // 2)
        elif big < nb + nlf:
            lf[big - nb] = max(1, lf[big - nb] // 2)
        else:
            rf[big - nb - nlf] = max(1, rf[big - nb - nlf] // 2)
    while math.prod(cs) > max_k:
        i = int(np.argmax(cs))
        cs[i] //= 2
    # lhs axes: roles in a random order.
    lroles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [("f", i) for i in range(nlf)]
    rroles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [("f", i) for i in range(nrf)]
    rng.shuffle(lroles)
    rng.shuffle(rroles)
    size = {"b": bs, "c": cs}
    lhs_shape = tuple(size[r][i] if r != "f" else lf[i] for r, i in lroles)
    rhs_shape = tuple(size[r][i] if r != "f" else rf[i] for r, i in rroles)
    where = lambda roles, r, i: roles.index((r, i))
    # Contracting / batch pairs in a random (but matching) order.
    corder, border = rng.permutation(nc), rng.permutation(nb)
    lc = tuple(where(lroles, "c", int(i)) for i in corder)
    rc = tuple(where(rroles, "c", int(i)) for i in corder)
    lb = tuple(where(lroles, "b", int(i)) for i in border)
    rb = tuple(where(rroles, "b", int(i)) for i in border)
    return lhs_shape, rhs_shape, ((lc, rc), (lb, rb))


def dot_dn(a_nd, b_nd):
    return (((a_nd - 1,), (max(b_nd - 2, 0),)), ((), ()))


def generate(seed: int, scale: float = 1.0) -> List[Group]:
    """The groups of one run (a pure function of the seed)."""
    rng = np.random.default_rng(seed)
    names = float32_schemes()
    groups: List[Group] = []

    def laws(v, pool=ALL_LAWS):
        # Every law at least once per group where v allows, then random ones.
        out = list(pool)[:v] + [str(rng.choice(pool)) for _ in range(max(0, v - len(pool)))]
        rng.shuffle(out)
        return tuple(out)

    def add(**kw):
        groups.append(Group(gid=len(groups), **kw))

    for name in names:
        # int8 schemes compile 3-5x slower (int8 products, tile exponents and
        # the float fallback): half the shapes, twice the cases per shape.
        per_scheme = max(1, int(round((9 if name.startswith("int8") else 18) * scale)))
        v = 720 // per_scheme
        for i in range(per_scheme):
            lhs, rhs, dn = random_dot_general(rng)
            ax = int(rng.integers(0, min(len(lhs), len(rhs)) + 1)) if i % 3 == 2 else 0
            add(scheme=name, api="dot_general", transform="vmap", lhs_shape=lhs, rhs_shape=rhs, dn=dn,
                laws=laws(v), vmap_axis=ax, rerun=(i == 0))
        # jnp.dot / matmul shapes: vectors, matrices, broadcasting batches.
        m, k, n = (int(rng.choice(SMALL[1:])) for _ in range(3))
        k = int(rng.choice((1, 7, 17, 31, 64, 129)))
        add(scheme=name, api="dot", transform="vmap", lhs_shape=(k,), rhs_shape=(k, n), dn=dot_dn(1, 2),
            laws=laws(16))
        add(scheme=name, api="dot", transform="vmap", lhs_shape=(m, k), rhs_shape=(k,), dn=dot_dn(2, 1),
            laws=laws(16))
        add(scheme=name, api="matmul", transform="vmap", lhs_shape=(2, 1, m, k), rhs_shape=(3, k, n),
            dn=None, laws=laws(16))
        # Large K (a few per scheme): K up to 4096, small output.
        kk = int(rng.choice((1000, 2047, 4096)))
        add(scheme=name, api="dot_general", transform="vmap", lhs_shape=(3, kk), rhs_shape=(kk, 2),
            dn=(((1,), (0,)), ((), ())), laws=laws(8, WELL_SCALED + ("specials", "pow2(+-60)")))
        # Unbatched jit calls (the rare-path lax.cond runs as a real conditional).
        lhs, rhs, dn = random_dot_general(rng, max_out=200)
        add(scheme=name, api="dot_general", transform="jit", lhs_shape=lhs, rhs_shape=rhs, dn=dn, laws=laws(6))
        # Differentiation (well-scaled data: gradients of Inf/NaN are not FP32-defined).
        for tr in ("jvp", "grad"):
            lhs, rhs, dn = random_dot_general(rng, max_k=256, max_out=200)
            while not dn[0][0]:  # the jvp check concatenates along a contracting axis
                lhs, rhs, dn = random_dot_general(rng, max_k=256, max_out=200)
            add(scheme=name, api="dot_general", transform=tr, lhs_shape=lhs, rhs_shape=rhs, dn=dn,
                laws=laws(8, WELL_SCALED))
    # emulate(f) through control flow (a scheme per group, in turn).
    for i, tr in enumerate(("scan", "while", "cond") * max(1, int(round(5 * scale)))):
        lhs, rhs, dn = random_dot_general(rng, max_k=512, max_out=200)
        name = names[int(rng.integers(len(names)))]
        add(scheme=name, api="emulate", transform=tr, lhs_shape=lhs, rhs_shape=rhs, dn=dn, laws=laws(8))
    return groups


def num_cases(groups) -> int:
    return sum(len(g.laws) for g in groups)


def make_operands(g: Group, seed: int):
    """Stacked operands (V, *shape) of a group's cases, from (seed, gid)."""
    rng = np.random.default_rng([seed, g.gid])
    a = np.stack([sample(l, g.lhs_shape, rng) for l in g.laws]) if g.laws else None
    b = np.stack([sample(l, g.rhs_shape, rng) for l in g.laws]) if g.laws else None
    return a, b


# ----------------------------------------------------------------------------
# Checks.

def canonical(lhs, rhs, dn):
    """Stacked operands (V, ...) -> (V, B, M, K) and (V, B, K, N), numpy,
    axes ordered as lax.dot_general orders its output (batch, lhs free, rhs free)."""
    (lc, rc), (lb, rb) = dn
    lf = [d for d in range(lhs.ndim - 1) if d not in lc and d not in lb]
    rf = [d for d in range(rhs.ndim - 1) if d not in rc and d not in rb]
    sh = lambda x, axes: int(math.prod(x.shape[1 + d] for d in axes))
    v = lhs.shape[0]
    a = lhs.transpose([0] + [1 + d for d in (*lb, *lf, *lc)]).reshape(v, sh(lhs, lb), sh(lhs, lf), sh(lhs, lc))
    b = rhs.transpose([0] + [1 + d for d in (*rb, *rc, *rf)]).reshape(v, sh(rhs, rb), sh(rhs, rc), sh(rhs, rf))
    return a, b


def stacked_dn(dn):
    (lc, rc), (lb, rb) = dn
    s = lambda t: tuple(d + 1 for d in t)
    return ((s(lc), s(rc)), ((0,) + s(lb), (0,) + s(rb)))


def float64_reference(lhs, rhs, dn):
    """The exact float64 dot_general of stacked float32 cases (IEEE NaN/Inf
    rules: Inf * 0 = NaN, Inf - Inf = NaN), via jaxemu.testing's einsum
    reference, independent of jaxemu.dims."""
    with np.errstate(invalid="ignore", over="ignore"):
        return T.dot_general_reference(lhs.astype(np.float64), rhs.astype(np.float64), stacked_dn(dn))


def componentwise_bound(scheme, a, b):
    """Bound on |C - C64| per entry for canonical stacked float64 (V, B, M, K) x
    (V, B, K, N) operands with NaN/Inf zeroed, from the scheme's parameters:

      (K + 2) u |A||B|            elementwise slice error u = max(unit_roundoff, 2^-24)
                                  plus FP32 accumulation (K adds, level combine)
    + fp16 row scaling:           values ~2^25 below their row's largest lose bits
                                  (README): 2^-46 rowmax |B| + 2^-46 |A| colmax
    + int8 per-tile fixed point:  error relative to the tile maximum; the row's
                                  maximum bounds it: 2 u_s rowmax colmax per term
    + flushing (XLA's CPU flushes subnormals, as does FP32 itself there):
                                  2^-120 (K + sum|A| + sum|B|) and every term
                                  with a subnormal input.
    """
    s = jaxemu.get_scheme(scheme)
    k = a.shape[-1]
    aa, ab = np.abs(a), np.abs(b)
    absab = aa @ ab
    u = max(s.unit_roundoff, U32)
    bound = (k + 2) * u * absab
    parts = [p for p in s.parts if p.family != "native"]
    rowmax = aa.max(axis=-1, keepdims=True) if k else np.zeros(aa.shape[:-1] + (1,))
    colmax = ab.max(axis=-2, keepdims=True) if k else np.zeros((1,) + ab.shape[-1:])
    suma, sumb = aa.sum(-1, keepdims=True), ab.sum(-2, keepdims=True)
    for p in parts:
        if getattr(p, "fmt", None) == "fp16":
            # Rows scaled to a maximum in [2^13, 2^14); the last slice's grid is
            # fp16's subnormal step 2^-24, scaled by 2^-sb per further slice.
            lost = 2.0 ** -(35 + p.lo_scale_bits * (p.slices - 1))
            bound = bound + lost * (rowmax * sumb + suma * colmax) + (k + 2) * U32 * absab
    if s.family == "int8":
        fb = jaxemu.get_scheme(s.fallback)
        bound = bound + 2 * k * (s.unit_roundoff + U32) * rowmax * colmax + (k + 2) * max(fb.unit_roundoff, U32) * absab
    if s.family == "ozaki2":
        # Ozaki II rounds each entry to an integer of pa (pb) bits relative to
        # its row's (column's) maximum: values far below it lose their bits,
        # all of them 2^pa below (docstring of schemes.Ozaki2), like int8's
        # fixed point but with no fallback.
        pa, pb = s.bits_for(max(k, 1))
        bound = bound + (2.0 ** (1 - pa) * rowmax * sumb + 2.0 ** (1 - pb) * suma * colmax
                         + 2.0 ** (2 - pa - pb) * k * rowmax * colmax)
    sub_a = (aa < FLT_MIN) & (aa > 0)
    sub_b = (ab < FLT_MIN) & (ab > 0)
    bound = bound + 2.0 ** -120 * (k + suma + sumb) + (aa * sub_a) @ ab + aa @ (ab * sub_b)
    return bound, absab


@dataclasses.dataclass
class Tally:
    cases: int = 0
    entries: int = 0
    order_dependent: int = 0   # entries exempt from the exact pattern (see pattern())
    normwise: int = 0          # cases held to the documented normwise bound
    specials: int = 0          # NaN/Inf entries checked exactly
    reruns: int = 0
    bad_inputs: int = 0

    def add(self, other: "Tally"):
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def order_dependent(s, a, b, absab, k, r):
    """Entries (canonical (V, B, M, N)) whose FP32 value depends on the
    summation order, so no exact NaN/Inf pattern is required there."""
    # Order-dependent entries: where finite terms can overflow FP32 (|A||B| near
    # FLT_MAX), FP32's own result depends on the summation order (+Inf and -Inf
    # partial products give NaN even where the exact sum is small), and jaxemu
    # takes FP32's value there (README). Exempt from the exact pattern; still:
    # never a wrong-signed Inf where the exact result certainly overflows, and
    # finite results within the bound.
    od = absab * (1 + (k + 4) * 2.0 ** -23) >= FLT_MAX
    if s.family in ("native", "auto"):
        # Native FP32 on XLA's CPU flushes subnormal inputs: Inf * 1e-40 is NaN
        # there (platform semantics, not jaxemu's; auto runs native FP32 on
        # small products); emulated schemes give FP32's Inf.
        inf_a, inf_b = np.isinf(a), np.isinf(b)
        sub_a = (np.abs(a) < FLT_MIN) & (a != 0)
        sub_b = (np.abs(b) < FLT_MIN) & (b != 0)
        od |= ((inf_a.astype(float) @ sub_b.astype(float)) + (sub_a.astype(float) @ inf_b.astype(float))) > 0
    od &= ~np.isnan(r)  # a NaN term or Inf * 0 is NaN in any order
    return od


def order_dependent_entries(g: Group, lhs, rhs, dn=None):
    """order_dependent() for stacked operands, in the output's shape (V, *out_shape)."""
    dn = dn if dn is not None else g.dn
    ref = float64_reference(lhs, rhs, dn)
    a, b = canonical(lhs.astype(np.float64), rhs.astype(np.float64), dn)
    a0 = np.where(np.isfinite(a), a, 0.0)
    b0 = np.where(np.isfinite(b), b, 0.0)
    _, absab = componentwise_bound(g.scheme, a0, b0)
    v, bb, m, k = a.shape
    od = order_dependent(jaxemu.get_scheme(g.scheme), a, b, absab, k, ref.reshape(v, bb, m, b.shape[-1]))
    return od.reshape(ref.shape)


def check_cases(g: Group, lhs, rhs, out, fp32_out=None, tally: Optional[Tally] = None,
                seed: Optional[int] = None, dn=None):
    """Check stacked outputs (V, *out_shape) of one group against float64.
    ``fp32_out``: lax.dot_general HIGHEST on the same inputs (for the
    normwise bound of well-scaled laws)."""
    dn = dn if dn is not None else g.dn
    tag = f"[seed {seed}] {g.describe()}"
    out = np.asarray(out)
    ref = float64_reference(lhs, rhs, dn)
    assert out.shape == ref.shape, f"{tag}: shape {out.shape} != dot_general's {ref.shape}"
    assert out.dtype == np.float32, f"{tag}: dtype {out.dtype}"
    a, b = canonical(lhs.astype(np.float64), rhs.astype(np.float64), dn)
    v, bb, m, k = a.shape
    n = b.shape[-1]
    c = out.astype(np.float64).reshape(v, bb, m, n)
    r = ref.reshape(v, bb, m, n)
    a0 = np.where(np.isfinite(a), a, 0.0)
    b0 = np.where(np.isfinite(b), b, 0.0)
    bound, absab = componentwise_bound(g.scheme, a0, b0)
    s = jaxemu.get_scheme(g.scheme)
    t = Tally(cases=v, entries=c.size)
    od = order_dependent(s, a, b, absab, k, r)
    t.order_dependent = int(od.sum())
    strict = ~od
    nan_c, nan_r = np.isnan(c), np.isnan(r)
    # Strict entries: |A||B| < FLT_MAX, so no partial sum overflows and FP32's
    # NaN/Inf pattern is the float64 one, exactly.
    bad = strict & ((nan_c != nan_r) | (np.isposinf(c) != np.isposinf(r)) | (np.isneginf(c) != np.isneginf(r)))
    # Order-dependent entries: any of NaN, +-Inf (with FMA, +Inf + (-big) stays
    # +Inf even where the exact sum is negative) or a finite value within the bound.
    bad |= od & np.isinf(r) & np.isfinite(c)  # an Inf input term never gives a finite sum
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise AssertionError(f"{tag}: NaN/Inf pattern differs from FP32's at case {i[0]} ({g.laws[i[0]]}), "
                             f"canonical entry {i[1:]}: got {c[i]}, float64 {r[i]}; {int(bad.sum())} entries")
    t.specials = int((strict & ~np.isfinite(r)).sum())
    chk = np.isfinite(c) & np.isfinite(r)
    err = np.where(chk, np.abs(c - np.where(chk, r, 0.0)), 0.0)
    over = chk & (err > bound)
    if over.any():
        i = tuple(np.argwhere(over)[0])
        raise AssertionError(f"{tag}: error {err[i]:.3g} above the componentwise bound {bound[i]:.3g} at case "
                             f"{i[0]} ({g.laws[i[0]]}), canonical entry {i[1:]}: got {c[i]!r}, float64 {r[i]!r}")
    # Documented normwise bounds, well-scaled laws.
    if fp32_out is not None:
        c32 = np.asarray(fp32_out, np.float64).reshape(v, bb, m, n)
        for j, law in enumerate(g.laws):
            if law not in WELL_SCALED:
                continue
            nr = np.linalg.norm(r[j])
            if nr == 0:  # K = 0 or an empty output: exact zeros
                assert np.all(c[j] == 0), f"{tag}: case {j}: nonzero entries where the product is 0"
                t.normwise += 1
                continue
            e = T.relerr(c[j], r[j])
            e32 = T.relerr(c32[j], r[j])
            if min(k, c[j].size) < 16:
                continue  # too few terms or entries for the random-data statistics behind
                # the documented bounds: the componentwise bound above holds these
            u = max(s.unit_roundoff, U32)
            # FP32-class: 2x FP32's own error (docs/accuracy.md), plus 2u: the
            # termwise sum rounds each level's accumulator and their sum once
            # more, a fixed cost per entry that matters only where FP32's own
            # error is a single rounding (small K; at K = 1024 it is 2.3x).
            lim = 2 * e32 + 2 * u if s.fp32_class else s.error_bound()
            assert e <= lim, (f"{tag}: case {j} ({law}): relative error {e:.3g} above the documented bound "
                              f"{lim:.3g} (FP32's {e32:.3g})")
            t.normwise += 1
    if tally is not None:
        tally.add(t)
    return t


# ----------------------------------------------------------------------------
# Bad input: (description, call, exception type, regex naming the argument).

BAD_DTYPES = (np.int8, np.int16, np.int32, np.uint8, np.bool_, np.complex64, np.float64)


def bad_inputs(seed: int, n: int = 400):
    """n random invalid calls of dot / dot_general / matmul. Each is a valid
    call (random shapes, dims, scheme) with one thing broken."""
    rng = np.random.default_rng([seed, 12])
    names = float32_schemes()
    out = []
    kinds = ("dtype", "float64", "k-mismatch", "out-of-range", "duplicate", "scheme", "non-array",
             "rank", "dn-type", "batch-mismatch")
    for i in range(n):
        kind = kinds[i % len(kinds)]
        scheme = names[int(rng.integers(len(names)))]
        while True:
            lhs, rhs, dn = random_dot_general(rng, max_k=64, max_out=64)
            (lc, rc), (lb, rb) = dn
            if lc or kind not in ("k-mismatch", "duplicate", "out-of-range"):
                if lb or kind != "batch-mismatch":
                    break
        a = np.ones(lhs, np.float32)
        b = np.ones(rhs, np.float32)
        side = int(rng.integers(2))  # which operand is broken
        nm = ("lhs", "rhs")[side]
        api = "dot_general"
        if kind in ("dtype", "float64"):
            dt = np.float64 if kind == "float64" else BAD_DTYPES[int(rng.integers(len(BAD_DTYPES) - 1))]
            x = (a, b)[side].astype(dt)
            a, b = (x, b) if side == 0 else (a, x)
            exc, msg = TypeError, f"{nm} has dtype {np.dtype(dt).name}"
        elif kind == "k-mismatch":
            j = int(rng.integers(len(lc)))
            shp = list(rhs)
            shp[rc[j]] += int(rng.integers(1, 4))
            b = np.ones(shp, np.float32)
            exc, msg = ValueError, "contracting dimensions differ in size"
        elif kind == "batch-mismatch":
            j = int(rng.integers(len(lb)))
            shp = list(rhs)
            shp[rb[j]] += int(rng.integers(1, 4))
            b = np.ones(shp, np.float32)
            exc, msg = ValueError, "batch dimensions differ in size"
        elif kind == "out-of-range":
            nd = (len(lhs), len(rhs))[side]
            bad = int(rng.choice([nd, nd + 3, -nd - 1]))
            dn = (((bad,) + lc[1:], rc), (lb, rb)) if side == 0 else ((lc, (bad,) + rc[1:]), (lb, rb))
            exc, msg = ValueError, f"dimension_numbers: {nm} axis {bad} is out of range"
        elif kind == "duplicate":
            dn = ((lc + lc[:1], rc + rc[:1]), (lb, rb))
            exc, msg = ValueError, "dimension_numbers: lhs axes repeat"
        elif kind == "scheme":
            scheme = str(rng.choice(["bf16x7", "int8_l5", "fp64", "", "bf16 x6", "tf32x9"]))
            exc, msg = ValueError, "unknown scheme"
        elif kind == "non-array":
            x = [None, "abc", {}, object(), {1, 2}][int(rng.integers(5))]
            a, b = (x, b) if side == 0 else (a, x)
            exc, msg = TypeError, f"{nm} must be an array"
        elif kind == "rank":
            api = str(rng.choice(["dot", "matmul"]))
            a, b = (np.float32(2.0), np.ones((3, 2), np.float32)) if side == 0 else (np.ones(3, np.float32), np.float32(2.0))
            exc, msg = ValueError, f"rank >= 1, but {'ab'[side]} is a scalar"
        else:  # dn-type
            bad = [1.5, True, "1", None][int(rng.integers(4))]
            dn = (((bad,), (0,)), ((), ()))
            exc, msg = ValueError, "dimension_numbers must be"
        out.append((f"bad input {i} ({kind}, {api}, scheme {scheme!r})", api, a, b, dn, scheme, exc, msg))
    return out
