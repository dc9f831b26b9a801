"""Ozaki scheme II in plain JAX: the xla backend's implementation of the
``ozaki2_f32`` / ``ozaki2_f64`` schemes (jaxemu.schemes.Ozaki2).

Method (Ozaki, Uchino & Imamura, "Ozaki Scheme II: A GEMM-oriented emulation
of floating-point matrix multiplication using an integer modular technique";
GEMMul8 by Uchino), on finite canonical operands a: (B, M, K), b: (B, K, N):

1. Scale each row of A by 2^ea_i and each column of B by 2^eb_j so that its
   largest |value| lies in [2^(p-1), 2^p), and round to integers A', B'
   (exact power-of-two scaling; the rounding keeps p bits relative to the
   row's maximum). |A'_ik| <= 2^pa, |B'_kj| <= 2^pb, hence
   |(A' B')_ij| <= K 2^(pa + pb) < M / 4, M the product of the moduli.
2. For each modulus m_l (pairwise coprime, <= 256) take the symmetric
   residues of A' and B' (int8, in [-128, 127]) and their product in int32
   (``lax.dot_general(..., preferred_element_type=int32)``: exact while
   K * 128^2 < 2^31; K is cut into chunks of 2^16 otherwise, each chunk's
   product reduced mod m_l before the chunks are added).
3. Reconstruct the integer C' = A' B' from its residues: Garner's algorithm
   gives its mixed-radix digits (C' = v_1 + v_2 m_1 + v_3 m_1 m_2 + ...),
   each a small integer computed in int32 arithmetic; Horner's rule turns
   the digits into base-2^16 limbs, exactly, in int32. Then C' is converted
   to floating point (one rounding per limb, magnitudes added smallest first:
   within an ulp of C') and multiplied by 2^-(ea_i + eb_j).

Why no int64 / float64 CRT sums (the paper accumulates sum_l P_l q_l in
float64 pairs): jax's int64 and float64 exist only with jax_enable_x64,
which FP32 users rarely enable; the limb reconstruction needs only int32
and is exact, so ozaki2_f32 runs the same with x64 on or off. ozaki2_f64
(x64 on by necessity) uses int64 only to hold the scaled operands A', B'
(up to 62 bits).

This module sits outside jaxemu.backends so that backends.xla can import it
without an import cycle (importing a sibling inside jaxemu.backends runs the
package's __init__, which imports backends.xla).
"""
from __future__ import annotations

import math
from typing import Tuple

import jax.numpy as jnp
import numpy as np
from jax import lax

from ._int8dot import int8_dot_general

# int8 x int8 products are at most 128^2 = 2^14 in magnitude; an int32
# accumulator is exact for 2^16 of them (2^30 < 2^31). Longer K is cut into
# chunks of this length.
K_CHUNK = 1 << 16
# int32 limbs of the reconstruction: base 2^16, so that limb * 256 + carry
# stays far below 2^31.
LIMB_BITS = 16


def _pairwise_coprime_moduli(count: int) -> Tuple[int, ...]:
    """Greedy, largest first: 256, 255, 253, 251, 247, 241, 239, 233, ..."""
    out = []
    m = 256
    while len(out) < count and m > 1:
        if all(math.gcd(m, x) == 1 for x in out):
            out.append(m)
        m -= 1
    return tuple(out)


# Enough for FP64 (about 20 moduli) with room: 40 moduli, ~300 bits.
MODULI = _pairwise_coprime_moduli(40)


def moduli_bits(n: int) -> float:
    """log2 of the product of the first n moduli."""
    return float(sum(math.log2(m) for m in MODULI[:n]))


def operand_bits(n: int, k: int, max_bits: int) -> Tuple[int, int]:
    """(pa, pb): bits of the scaled integer operands such that
    K 2^(pa + pb) <= M / 4 (so |C'| fits the symmetric residue range with
    margin), each capped at ``max_bits``."""
    total = math.floor(moduli_bits(n)) - 2 - max(0, math.ceil(math.log2(max(k, 1))))
    pa = min(max_bits, total // 2)
    pb = min(max_bits, total - pa)
    return pa, pb


# ----------------------------------------------------------------------------
# Exact bit-level helpers for float32 and float64.

def _layout(dtype):
    if np.dtype(dtype) == np.float64:
        return jnp.uint64, 52, 1023, 1074
    return jnp.uint32, 23, 127, 149


def exponent(x):
    """floor(log2 |x|) (int32) for finite nonzero x, subnormals included (read
    from the bits: XLA's CPU flushes subnormal arithmetic to zero); a value
    below every subnormal's for zero."""
    ut, mbits, bias, sub = _layout(x.dtype)
    u = lax.bitcast_convert_type(jnp.abs(x), ut)
    e = (u >> mbits).astype(jnp.int32)
    m = u & ut((1 << mbits) - 1)
    width = 64 if ut == jnp.uint64 else 32
    mlog = (width - 1 - lax.clz(m)).astype(jnp.int32)  # -1 for m == 0
    low = jnp.where(m > 0, -sub + mlog, -sub - 2)
    return jnp.where(e > 0, e - bias, low)


def _pow2(e, dtype):
    ut, mbits, bias, _ = _layout(dtype)
    return lax.bitcast_convert_type((e + bias).astype(ut) << mbits, dtype)


def ldexp(x, e):
    """x * 2^e in three exact power-of-two steps of the same sign (no
    intermediate over- or underflow unless the result does)."""
    e = jnp.asarray(e, jnp.int32)
    e1 = e // 3
    e2 = (e - e1) // 2
    e3 = e - e1 - e2
    return x * _pow2(e1, x.dtype) * _pow2(e2, x.dtype) * _pow2(e3, x.dtype)


# ----------------------------------------------------------------------------
# The method.

def row_maxima(x, axis: int):
    """max |x| along ``axis`` (kept as a size-1 axis): NaN or Inf where the
    row holds one (max propagates NaN)."""
    return jnp.max(jnp.abs(x), axis=axis, keepdims=True)


def scale_exponents(x, axis: int, bits: int, amax=None):
    """Per-row (reduced along ``axis``, kept as a size-1 axis) int32 exponents
    e with max |x 2^e| in [2^(bits-1), 2^bits); 0 for rows of zeros.
    ``amax``: the rows' maxima (row_maxima), when the caller has them."""
    amax = row_maxima(x, axis) if amax is None else amax
    return jnp.where(amax > 0, bits - 1 - exponent(amax), 0)


def scale_to_integers(x, axis: int, bits: int):
    """Per-row (along ``axis``) exponents e and integers X' = round(x 2^e)
    (ties to even) with max |x 2^e| in [2^(bits-1), 2^bits) (rows of zeros:
    e = 0, X' = 0). X' is int32 for float32 x (bits <= 30), int64 for float64 x."""
    e = scale_exponents(x, axis, bits)
    it = jnp.int64 if x.dtype == jnp.float64 else jnp.int32
    return e, jnp.round(ldexp(x, e)).astype(it)


def symmetric_residues(xi, moduli):
    """int8 residues of the integer array xi modulo each m, stacked on a new
    axis 0: r = xi mod m, minus m where r >= ceil(m / 2), so r lies in
    [-128, 127] for m = 256 and in [-(m-1)/2, (m-1)/2] for odd m."""
    out = []
    for m in moduli:
        r = jnp.remainder(xi, xi.dtype.type(m))
        r = jnp.where(r >= (m + 1) // 2, r - m, r)
        out.append(r.astype(jnp.int8))
    return jnp.stack(out)


def modular_products(ar, br, moduli):
    """(A' B') mod m_l in [0, m_l), int32 (n, B, M, N), from int8 residues
    ar: (n, B, M, K), br: (n, B, K, N). Exact: K is cut into chunks of
    K_CHUNK, each chunk's int32 product reduced mod m before adding."""
    n, bsz, m, k = ar.shape
    nn = br.shape[3]
    mods = jnp.asarray(moduli, jnp.int32).reshape(n, 1, 1, 1)
    if k <= K_CHUNK:
        p = int8_dot_general(ar, br, (((3,), (2,)), ((0, 1), (0, 1))))
        return jnp.remainder(p, mods)
    pad = (-k) % K_CHUNK
    if pad:  # zeros add nothing to the product
        ar = jnp.pad(ar, ((0, 0), (0, 0), (0, 0), (0, pad)))
        br = jnp.pad(br, ((0, 0), (0, 0), (0, pad), (0, 0)))
    nc = (k + pad) // K_CHUNK
    a5 = ar.reshape(n, bsz, m, nc, K_CHUNK)
    b5 = br.reshape(n, bsz, nc, K_CHUNK, nn)
    p = int8_dot_general(a5, b5, (((4,), (3,)), ((0, 1, 3), (0, 1, 2))))  # (n, B, nc, M, N)
    p = jnp.remainder(p, mods[..., None])
    # nc residues < 256 each: the sum stays far below 2^31 (nc < 2^23).
    return jnp.remainder(p.sum(axis=2, dtype=jnp.int32), mods)


def garner_digits(res, moduli):
    """Mixed-radix digits v_l (stacked, int32 (n, ...)) of the integer C' with
    residues res[l] (int32, in [0, m_l)), balanced: v_1 in [-128, 127] for
    m_1 = 256, v_l in [-(m_l-1)/2, (m_l-1)/2] for the odd moduli. Then
    C' = sum_l v_l W_l (W_l = m_1 ... m_{l-1}) covers every integer of
    |C'| < M / 4, and the sign of C' is the sign of its highest nonzero digit
    (|sum_{j<l} v_j W_j| <= W_l / 2).

    v_l = (r_l - sum_{j<l} v_j (W_j mod m_l)) (W_l^-1 mod m_l), reduced mod m_l:
    int32 arithmetic on values below 2^22. A loop over l (not unrolled), so
    that the compiled program stays small for the ~16 moduli of float64."""
    n = len(moduli)
    wmod = np.zeros((n, n), np.int32)  # W_j mod m_l for j < l, else 0
    inv = np.ones(n, np.int32)
    for l, ml in enumerate(moduli):
        w = 1
        for j in range(l):
            wmod[l, j] = w % ml
            w *= moduli[j]
        if l:
            inv[l] = pow(w % ml, -1, ml)
    mods = jnp.asarray(moduli, jnp.int32)
    wmod, inv = jnp.asarray(wmod), jnp.asarray(inv)
    bcast = (slice(None),) + (None,) * (res.ndim - 1)

    def body(l, digits):
        ml = mods[l]
        s = jnp.sum(wmod[l][bcast] * digits, axis=0, dtype=jnp.int32)  # |s| < 40 * 128 * 255 < 2^21
        r = jnp.remainder((res[l] - jnp.remainder(s, ml)) * inv[l], ml)
        v = jnp.where(r >= (ml + 1) // 2, r - ml, r)
        return lax.dynamic_update_index_in_dim(digits, v.astype(jnp.int32), l, axis=0)

    return lax.fori_loop(0, n, body, jnp.zeros(res.shape, jnp.int32))


def digits_to_limbs(digits, moduli, value_bits: int):
    """(sign, limbs) with sum_l v_l W_l = sign * sum_i limbs[i] 2^(16 i), exactly:
    Horner's rule X <- X m_l + u_l (u = sign * v, so X >= 0 at the end) on
    base-2^16 int32 limbs with floor carries (limbs[:-1] in [0, 2^16)).
    ``value_bits`` bounds log2 |C'|; Horner's partial values
    X_l = (|C'| - sum_{j<l} u_j W_j) / W_l are no larger in magnitude, so that
    many bits (plus a sign limb) hold every step."""
    n = len(moduli)
    sign = jnp.zeros(digits.shape[1:], jnp.int32)
    for l in range(n):  # the highest nonzero digit decides
        sign = jnp.where(digits[l] != 0, jnp.sign(digits[l]), sign)
    u = digits * sign[None]  # |C'| = sum u_l W_l
    nl = -(-(value_bits + 1) // LIMB_BITS) + 1
    mask = (1 << LIMB_BITS) - 1
    mods = jnp.asarray(moduli, jnp.int32)

    def body(t, limbs):
        l = n - 1 - t  # top digit first; X starts at 0, so X m + u_top = u_top
        limbs = limbs * mods[l]
        x = [limbs[i] for i in range(nl)]
        x[0] = x[0] + u[l]
        for i in range(nl - 1):  # floor carries: lower limbs in [0, 2^16)
            c = x[i] >> LIMB_BITS
            x[i] = x[i] & mask
            x[i + 1] = x[i + 1] + c
        return jnp.stack(x)

    limbs = lax.fori_loop(0, n, body, jnp.zeros((nl,) + digits.shape[1:], jnp.int32))
    return sign, [limbs[i] for i in range(nl)]


def limbs_to_float(sign, limbs, dtype):
    """sign * sum_i limbs[i] 2^(16 i) in ``dtype``: each limb term is exact;
    added smallest first, the partial sums are nonnegative and grow, so the
    result is within about an ulp of the integer (one rounding per addition,
    the earlier ones at most 2^-16 of the later ones unless limbs are small)."""
    out = jnp.zeros(limbs[0].shape, dtype)
    for i, x in enumerate(limbs):
        out = out + x.astype(dtype) * dtype(2.0 ** (LIMB_BITS * i))
    return out * sign.astype(dtype)


def norm_budgets(n_moduli: int, k: int, max_bits: int) -> Tuple[float, float]:
    """(La, Lb): log2 of the bounds on the 2-norms of A's scaled rows and B's
    scaled columns under the norm rule, La + Lb = log2(M / 4), so that
    ||A'_i|| ||B'_j|| <= M / 4. Split as the max rule splits its bits
    (La - Lb = pa - pb): a row scaled by the max rule has norm at most
    sqrt(K) 2^pa <= 2^La, so the two rules may meet in one product."""
    pa, pb = operand_bits(n_moduli, k, max_bits)
    total = moduli_bits(n_moduli) - 2.0
    return (total + pa - pb) / 2.0, (total - pa + pb) / 2.0


def _row_norm_upper(x, axis: int, ex):
    """An upper bound of each row's 2-norm times 2^-ex (ex = floor(log2 of
    the row's max |x|), so the bound is at most ~2 sqrt(K)), keepdims.

    Each |x| 2^-ex is rebuilt from the bits as (integer significand) times a
    power of two no smaller than 2^-100 (2^-900 for float64): every value and
    product stays normal, so a platform that flushes subnormals (XLA's CPU)
    cannot make the bound smaller than the norm of the integers the residue
    kernel computes exactly; raising tiny powers only enlarges the bound.
    The float sum and square root are then inflated by their rounding error."""
    ut, mbits, bias, _ = _layout(x.dtype)
    dt = x.dtype.type
    u = lax.bitcast_convert_type(jnp.abs(x), ut)
    field = (u >> mbits).astype(jnp.int32)
    mant = u & ut((1 << mbits) - 1)
    sig = jnp.where(field > 0, mant | ut(1 << mbits), mant)
    scale = jnp.where(field > 0, field, 1) - bias - mbits - ex  # |x| 2^-ex = sig 2^scale
    floor = -100 if dt == np.float32 else -900
    y = sig.astype(x.dtype) * _pow2(jnp.maximum(scale, floor), x.dtype)
    eps = float(np.finfo(x.dtype).eps) / 2  # unit roundoff
    k = x.shape[axis]
    ss = jnp.sum(y * y, axis=axis, keepdims=True) * dt(1 + (k + 4) * eps)
    return jnp.sqrt(ss) * dt(1 + 4 * eps)


def norm_exponents(x, axis: int, budget_log2: float, min_bits: int, max_bits: int, amax=None):
    """Per-row exponents e (int32, keepdims) under the norm rule: the largest
    e with ||round(x_row 2^e)||_2 <= 2^budget_log2 (then by Cauchy-Schwarz
    |(A'B')_ij| <= ||A'_i|| ||B'_j|| <= M / 4 for any data, without the
    factor K max|A'| max|B'| of the max rule; budgets from norm_budgets),
    but never fewer than ``min_bits`` bits for the row's maximum (the max
    rule's, which already keeps the norm within budget) nor more than
    ``max_bits`` (int32 / int64 integers). Rows of zeros: e = 0.

    Rounding adds at most 1/2 per entry, sqrt(K)/2 to the norm: e satisfies
    2^e ||x_row|| + sqrt(K)/2 <= 2^budget_log2, found as floor(log2) of a
    lower bound of (2^budget_log2 - sqrt(K)/2) / ||x_row|| (GEMMul8's
    "fast mode" scaling, Ozaki, Uchino & Imamura). ``amax``: the rows'
    maxima (row_maxima), when the caller has them."""
    dt = x.dtype.type
    eps = float(np.finfo(x.dtype).eps) / 2
    k = x.shape[axis]
    amax = row_maxima(x, axis) if amax is None else amax
    ex = exponent(amax)
    room = 2.0 ** budget_log2 - math.sqrt(k) / 2
    room_lo = dt(room)
    if float(room_lo) > room:
        room_lo = np.nextafter(room_lo, dt(0))
    q = room_lo / _row_norm_upper(x, axis, ex) * dt(1 - 4 * eps)
    e = exponent(q) - ex  # 2^(e + ex) <= q
    e = jnp.clip(e, min_bits - 1 - ex, max_bits - 1 - ex)
    return jnp.where(amax > 0, e, 0)


def plan(k: int, n_moduli: int, max_bits: int):
    """(moduli, pa, pb, value_bits) of a product with contraction length k:
    the first ``n_moduli`` moduli, the bits of A's and B's scaled integers
    under the max rule (the least the norm rule gives), and a bound on
    log2 |A' B'| that holds under either rule (|A' B'| <= M / 4)."""
    pa, pb = operand_bits(n_moduli, k, max_bits)
    log2k = max(0, math.ceil(math.log2(max(k, 1))))
    # |A'B'| <= M / 4 (either rule) and <= K 2^(2 max_bits) (the integers' cap).
    value_bits = min(math.ceil(moduli_bits(n_moduli)) - 1, 2 * max_bits + log2k + 1)
    return MODULI[:n_moduli], pa, pb, value_bits


def exponents(a, b, n_moduli: int, max_bits: int, scaling: str = "norm", amax=None):
    """The scaling exponents of a (B, M, K) and b (B, K, N): (moduli, ea
    (B, M, 1), eb (B, 1, N), value_bits). "max": every row's maximum keeps
    pa (pb) bits, from |A'B'| <= K 2^(pa + pb) <= M / 4; "norm": each row
    as many as its 2-norm allows (norm_exponents), never fewer. ``amax``:
    (row_maxima(a, 2), row_maxima(b, 1)), when the caller has them."""
    ma, mb = (None, None) if amax is None else amax
    moduli, pa, pb, value_bits = plan(a.shape[2], n_moduli, max_bits)
    if scaling == "max":
        return moduli, scale_exponents(a, 2, pa, ma), scale_exponents(b, 1, pb, mb), value_bits
    if scaling != "norm":
        raise ValueError(f"Ozaki II scaling must be 'norm' or 'max', got {scaling!r}")
    la, lb = norm_budgets(n_moduli, a.shape[2], max_bits)
    ea = norm_exponents(a, 2, la, pa, max_bits, ma)
    eb = norm_exponents(b, 1, lb, pb, max_bits, mb)
    return moduli, ea, eb, value_bits


def scaled_integers(a, b, n_moduli: int, max_bits: int, scaling: str = "norm", amax=None):
    """The first step of ozaki2_dot: the moduli, and A, B scaled to integers
    per row of A / column of B (``exponents``): (moduli, (ea, ai), (eb, bi),
    value_bits), with ea (B, M, 1), eb (B, 1, N) their exponents and
    value_bits a bound on log2 |A' B'|."""
    moduli, ea, eb, value_bits = exponents(a, b, n_moduli, max_bits, scaling, amax)
    it = jnp.int64 if a.dtype == jnp.float64 else jnp.int32
    ai = jnp.round(ldexp(a, ea)).astype(it)
    bi = jnp.round(ldexp(b, eb)).astype(it)
    return moduli, (ea, ai), (eb, bi), value_bits


def reconstruct(pr, moduli, value_bits: int, ea, eb, dtype):
    """The last step of ozaki2_dot: C from the residues pr (n, B, M, N) of A'B'
    (int32 in [0, m_l)) and the scalings: Garner digits, exact limbs, one
    rounding to ``dtype``, scaled back by 2^-(ea + eb)."""
    sign, limbs = digits_to_limbs(garner_digits(pr, moduli), moduli, value_bits)
    c = limbs_to_float(sign, limbs, np.dtype(dtype).type)
    return ldexp(c, -(ea + eb))


def ozaki2_dot(a, b, n_moduli: int, max_bits: int, scaling: str = "norm", amax=None):
    """Ozaki II product of finite canonical a: (B, M, K), b: (B, K, N), both
    float32 or both float64, with the first ``n_moduli`` moduli (``amax``:
    as ``exponents``)."""
    moduli, (ea, ai), (eb, bi), value_bits = scaled_integers(a, b, n_moduli, max_bits, scaling, amax)
    pr = modular_products(symmetric_residues(ai, moduli), symmetric_residues(bi, moduli), moduli)
    return reconstruct(pr, moduli, value_bits, ea, eb, a.dtype)
