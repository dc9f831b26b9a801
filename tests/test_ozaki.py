"""Ozaki scheme II (ozaki2_f32, ozaki2_f64): exact integer parts, accuracy
against float64 (and against an exact product for float64), K chunking,
special values, shapes, transformations, dtype acceptance and refusal."""
import contextlib
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxemu
from jaxemu import _ozaki2 as O
from jaxemu import testing as T
from jaxemu.schemes import Ozaki2


@contextlib.contextmanager
def x64():
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", old)


def run(a, b, scheme="ozaki2_f32"):
    return np.asarray(jax.jit(lambda x, y: jaxemu.dot(x, y, scheme=scheme))(a, b))


# ----------------------------------------------------------------------------
# The moduli and the bit budget.

def test_moduli_are_pairwise_coprime_and_fit_int8_residues():
    ms = O.MODULI
    assert ms[:8] == (256, 255, 253, 251, 247, 241, 239, 233) and len(ms) == Ozaki2.MAX_MODULI
    assert all(2 <= m <= 256 for m in ms)
    assert all(math.gcd(x, y) == 1 for i, x in enumerate(ms) for y in ms[i + 1:])


@pytest.mark.parametrize("k", [1, 7, 256, 4096, 65536, 1 << 20])
def test_bit_budget_keeps_the_integer_product_inside_the_crt_range(k):
    s = jaxemu.get_scheme("ozaki2_f32")
    n = s.moduli_for(k)
    pa, pb = s.bits_for(k)
    big_m = math.prod(O.MODULI[:n])
    assert k * 2 ** (pa + pb) <= big_m // 4  # |A'B'| <= K 2^pa 2^pb < M/4
    assert min(pa, pb) >= s.target_bits and max(pa, pb) <= 30  # int32 operands
    assert n == 2 or min(O.operand_bits(n - 1, k, 30)) < s.target_bits  # the fewest moduli


def exact_integers(x, e):
    """round(x 2^e), ties to even, exactly (as the residue kernel computes
    them; XLA's CPU flushes subnormals in its own float scaling)."""
    return np.rint(np.ldexp(x.astype(np.float64), np.asarray(e, np.int64))).astype(np.int64)


def norm_rule_operands(kind, shape, rng):
    """Rows the norm bound must hold on: the laws, equal magnitudes (the
    worst case, norm = sqrt(K) max), one large entry per row (the best),
    subnormal rows, FLT_MAX, zeros mixed in."""
    if kind in T.LAWS:
        return T.sample(kind, shape, rng)
    x = rng.choice([-1.0, 1.0], shape).astype(np.float32)
    if kind == "equal":
        return x * np.float32(1.9999999)
    if kind == "spike":
        x *= np.float32(2.0 ** -20)
        x[..., 0] = 3.0
        return x
    if kind == "subnormal":  # every magnitude from subnormal to 2^-100, some exact zeros
        mag = np.ldexp(rng.uniform(1, 2, shape), rng.integers(-149, -100, shape)).astype(np.float32)
        return np.where(rng.random(shape) < 0.1, 0, mag * x).astype(np.float32)
    if kind == "huge":
        return (x * np.float32(3e38) * rng.uniform(0.5, 1, shape)).astype(np.float32)
    raise ValueError(kind)


@pytest.mark.parametrize("kind", list(T.LAWS) + ["equal", "spike", "subnormal", "huge"])
@pytest.mark.parametrize("k", [1, 7, 300, 4096])
@pytest.mark.parametrize("nm", [7, 8, 9])
def test_norm_rule_keeps_every_product_inside_the_crt_range(kind, k, nm, rng):
    # ||A'_i|| <= 2^L for every row and column of the exact integers, so
    # |A'B'| <= ||A'_i|| ||B'_j|| <= 2^2L = M / 4; and never fewer bits than
    # the max rule, never more than int32 holds.
    a = norm_rule_operands(kind, (2, 5, k), rng)
    b = norm_rule_operands(kind, (2, k, 6), rng)
    _, ea, eb, _ = O.exponents(jnp.asarray(a), jnp.asarray(b), nm, 30, "norm")
    _, ma, mb, _ = O.exponents(jnp.asarray(a), jnp.asarray(b), nm, 30, "max")
    ai, bi = exact_integers(a, ea), exact_integers(b, eb)
    la, lb = O.norm_budgets(nm, k, 30)
    assert la + lb == pytest.approx(O.moduli_bits(nm) - 2)
    assert np.sqrt((ai.astype(np.float64) ** 2).sum(axis=2)).max() <= 2.0 ** la
    assert np.sqrt((bi.astype(np.float64) ** 2).sum(axis=1)).max() <= 2.0 ** lb
    exact = np.einsum("bmk,bkn->bmn", np.abs(ai).astype(object), np.abs(bi).astype(object))
    assert exact.max() <= math.prod(O.MODULI[:nm]) // 4
    assert np.all(np.asarray(ea) >= np.asarray(ma)) and np.all(np.asarray(eb) >= np.asarray(mb))
    assert np.abs(ai).max() <= 2 ** 30 and np.abs(bi).max() <= 2 ** 30


def test_norm_rule_gains_the_bits_the_norm_allows(rng):
    # A row with one nonzero entry has norm = max: it gets the whole budget
    # (up to int32's 30 bits); rows of equal magnitudes get the max rule's.
    k, nm = 4096, 8
    pa, _ = O.operand_bits(nm, k, 30)
    a = np.zeros((1, 2, k), np.float32)
    a[0, 0, 17] = 1.5
    a[0, 1] = norm_rule_operands("equal", (k,), rng)
    la, _ = O.norm_budgets(nm, k, 30)
    ea = np.asarray(O.norm_exponents(jnp.asarray(a), 2, la, pa, 30))[0, :, 0]
    bits = ea + np.floor(np.log2(np.abs(a[0]).max(axis=1))) + 1  # bits of each row's scaled maximum
    assert bits[0] == min(30, math.floor(la))
    assert bits[1] in (pa, pa + 1) and pa == 24


def test_norm_rule_is_more_accurate_than_the_max_rule(rng):
    # Wide-exponent rows: a few entries carry the norm, so the others keep
    # ~log2 sqrt(K) more bits (CPU, 8 moduli, K = 4096: 0.08 against 0.33 x
    # FP32's error, docs/accuracy.md).
    a, b = T.operands("wide-exp", 32, 4096, 32, int(rng.integers(1 << 30)))
    ref = T.reference(a, b)
    s = jaxemu.get_scheme("ozaki2_f32").replace(moduli=8)
    e_norm = T.relerr(run(a, b, s), ref)
    e_max = T.relerr(run(a, b, s.replace(scaling="max")), ref)
    assert e_norm < 0.5 * e_max, (e_norm, e_max)


def test_k_chunk_cannot_overflow_int32():
    # The largest int8 x int8 product is (-128)^2 = 2^14; a chunk sums K_CHUNK of them.
    assert O.K_CHUNK * 128 ** 2 < 2 ** 31
    # Chunk residues (< 256) add up over at most 2^23 chunks without overflow.
    assert (2 ** 31 // 256) >= (1 << 23)


# ----------------------------------------------------------------------------
# Exact integer parts.

def test_modular_products_bit_for_bit_against_numpy_int64(rng):
    a = T.sample("normal(0,1)", (2, 9, 300), rng)
    b = T.sample("wide-exp", (2, 300, 11), rng)
    pa, pb = O.operand_bits(9, 300, 30)
    _, ai = O.scale_to_integers(jnp.asarray(a), 2, pa)
    _, bi = O.scale_to_integers(jnp.asarray(b), 1, pb)
    ai, bi = np.asarray(ai, np.int64), np.asarray(bi, np.int64)
    assert np.abs(ai).max() <= 2 ** pa and np.abs(ai).max() >= 2 ** (pa - 1)
    moduli = O.MODULI[:9]
    ar = O.symmetric_residues(jnp.asarray(ai, jnp.int32), moduli)
    br = O.symmetric_residues(jnp.asarray(bi, jnp.int32), moduli)
    got = np.asarray(O.modular_products(ar, br, moduli))
    exact = np.einsum("bmk,bkn->bmn", ai.astype(object), bi.astype(object))  # Python ints
    for l, m in enumerate(moduli):
        r = np.asarray(ar[l], np.int64)
        assert r.min() >= -128 and r.max() <= 127 and np.all((r - ai) % m == 0)
        np.testing.assert_array_equal(got[l], (exact % m).astype(np.int64))


def test_k_chunking_is_exact_at_the_int32_limit():
    # All residues -128 (the extreme) over K = 2^17 + 5: one int32 sum would be
    # 2^14 (2^17 + 5) > 2^31; the chunked sum must still give the exact residue.
    k = 2 ** 17 + 5
    moduli = O.MODULI[:3]
    ar = jnp.full((3, 1, 2, k), -128, jnp.int8)
    br = jnp.full((3, 1, k, 3), -128, jnp.int8)
    got = np.asarray(O.modular_products(ar, br, moduli))
    for l, m in enumerate(moduli):
        assert np.all(got[l] == (16384 * k) % m)


@pytest.mark.parametrize("n", [2, 5, 9, 16])
def test_crt_reconstruction_is_exact(n, rng):
    # Integers spread over the whole admitted range |C'| < M/4, with extremes.
    big_m = math.prod(O.MODULI[:n])
    lim = big_m // 4 - 1
    vals = [0, 1, -1, lim, -lim, 255, -256, 256 * 255, -(256 * 255) - 1]
    vals += [int(rng.integers(-2 ** 62, 2 ** 62)) * lim // 2 ** 62 for _ in range(60)]
    vals += [int(rng.integers(-1000, 1000)) for _ in range(20)]
    vals = [v for v in vals if abs(v) <= lim]
    res = jnp.asarray([[v % m for v in vals] for m in O.MODULI[:n]], jnp.int32)
    digits = O.garner_digits(res, O.MODULI[:n])
    bits = int(math.floor(math.log2(lim))) + 1
    sign, limbs = O.digits_to_limbs(digits, O.MODULI[:n], bits)
    sign = np.asarray(sign).astype(object)
    limbs = [np.asarray(x).astype(object) for x in limbs]
    assert all(np.all((x >= 0) & (x < 2 ** 16)) for x in limbs[:-1])
    got = sign * sum(x * 2 ** (16 * i) for i, x in enumerate(limbs))
    assert list(got) == vals
    # And the conversion to float rounds to within an ulp of the integer
    # (float32's range holds the limbs of up to 9 moduli: ozaki2_f32's values).
    if n > 9:
        return
    f = np.asarray(O.limbs_to_float(jnp.asarray(np.asarray(sign, np.int32)),
                                    [jnp.asarray(np.asarray(x, np.int32)) for x in limbs], np.float32), np.float64)
    for v, fv in zip(vals, f):
        assert abs(Fraction(float(fv)) - v) <= abs(v) * 2.0 ** -23


def test_small_integer_operands_give_the_exact_product(rng):
    # Integers of 8 bits: scaling loses nothing and |C| < 2^24 is exact in f32.
    a = rng.integers(-255, 256, (13, 500)).astype(np.float32)
    b = rng.integers(-255, 256, (500, 6)).astype(np.float32)
    exact = a.astype(np.int64) @ b.astype(np.int64)
    assert np.abs(exact).max() < 2 ** 24
    np.testing.assert_array_equal(run(a, b), exact.astype(np.float32))


# ----------------------------------------------------------------------------
# Accuracy against float64, relative to FP32's own error.

def errors(law, m, k, n, seed, scheme="ozaki2_f32"):
    a, b = T.operands(law, m, k, n, seed)
    ref = T.reference(a, b)
    e32 = T.relerr(jaxemu.dot(a, b, scheme="fp32"), ref)
    return T.relerr(run(a, b, scheme), ref), e32


@pytest.mark.parametrize("law", T.LAWS)
@pytest.mark.parametrize("m,k,n", [(48, 256, 40), (32, 4096, 32)])
def test_error_at_most_sgemm(law, m, k, n, rng):
    e, e32 = errors(law, m, k, n, int(rng.integers(1 << 30)))
    assert e <= e32, (law, k, e, e32)


@pytest.mark.parametrize("law", ["uniform(-1,1)", "wide-exp"])
def test_error_at_most_sgemm_at_large_k(law, rng):
    e, e32 = errors(law, 4, 65536, 3, int(rng.integers(1 << 30)))
    assert e <= e32, (law, e, e32)


def test_fewer_moduli_trade_accuracy_for_speed(rng):
    a, b = T.operands("normal(0,1)", 24, 2048, 24, int(rng.integers(1 << 30)))
    ref = T.reference(a, b)
    e32 = T.relerr(jaxemu.dot(a, b, scheme="fp32"), ref)
    s = jaxemu.get_scheme("ozaki2_f32")
    errs = {n: T.relerr(run(a, b, s.replace(moduli=n)), ref) for n in (5, 6, 7, s.moduli_for(2048))}
    assert errs[5] > errs[6] > errs[7] > errs[s.moduli_for(2048)]
    assert errs[5] > 20 * e32  # 5 moduli: ~15 bits per entry (norm rule, normal data)
    assert errs[s.moduli_for(2048)] <= e32
    assert s.replace(moduli=6).num_products == 6


# ----------------------------------------------------------------------------
# Special values, shapes, batching, transformations.

def test_nan_inf_follow_fp32():
    a = np.ones((4, 6), np.float32)
    b = np.ones((6, 5), np.float32)
    a[0, 1] = np.inf
    b[1, 2] = 0.0  # Inf * 0 = NaN at C[0, 2]
    a[1, 3] = np.nan
    a[2, 0], a[2, 1] = np.inf, -np.inf  # +Inf - Inf = NaN
    b[:, 4] = 1e-30  # Inf * tiny = Inf, not NaN
    c, c32 = run(a, b), np.asarray(jax.lax.dot(a, b, precision="highest"))
    np.testing.assert_array_equal(np.isnan(c), np.isnan(c32))
    np.testing.assert_array_equal(np.isposinf(c), np.isposinf(c32))
    assert np.isnan(c[0, 2]) and np.isposinf(c[0, 4]) and np.all(np.isnan(c[1]))
    np.testing.assert_array_equal(c[3], c32[3])  # untouched row: 6 exactly


def test_overflow_and_huge_and_tiny_rows():
    fmax = np.finfo(np.float32).max
    a = np.array([[fmax, fmax], [2e-38, 5e-38], [0.0, 0.0]], np.float32)
    b = np.array([[0.75, 2.0 ** -100], [0.75, 0.0]], np.float32)
    c = run(a, b)
    assert np.isposinf(c[0, 0])  # 1.5 FLT_MAX overflows in FP32 too
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert c[0, 1] == np.float32(ref[0, 1]) and np.all(c[2] == 0)
    # A row near FLT_MIN: scaled up by 2^154 (three exact steps) and back.
    # (Subnormals: XLA's CPU flushes them in FP32 too; test_special_values
    # checks their NaN/Inf pattern.)
    assert abs(c[1, 0] - ref[1, 0]) <= 2.0 ** -23 * abs(ref[1, 0]) and ref[1, 0] > 2.0 ** -126


# (test_shapes.py runs ozaki2_f32 on more odd shapes and dimension numbers.)
@pytest.mark.parametrize("m,k,n", [(0, 5, 3), (3, 0, 4), (1, 1, 1), (17, 7, 13)])
def test_odd_and_empty_shapes(m, k, n, rng):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = run(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert c.shape == (m, n) and c.dtype == np.float32
    absab = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert np.all(np.abs(c - ref) <= 2.0 ** -23 * absab + 1e-38)


def test_batch_dims_vmap_and_dimension_numbers(rng):
    a = rng.standard_normal((3, 6, 40)).astype(np.float32)
    b = rng.standard_normal((3, 5, 40)).astype(np.float32)
    dn = (((2,), (2,)), ((0,), (0,)))  # batch 0, contract the last axes of both
    c = np.asarray(jaxemu.dot_general(a, b, dn, scheme="ozaki2_f32"))
    ref = np.einsum("bmk,bnk->bmn", a.astype(np.float64), b.astype(np.float64))
    absab = np.einsum("bmk,bnk->bmn", np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert np.all(np.abs(c - ref) <= 2.0 ** -23 * absab)
    v = jax.vmap(lambda x, y: jaxemu.dot(x, y.T, scheme="ozaki2_f32"))(a, b)
    np.testing.assert_array_equal(np.asarray(v), c)  # same exact integer parts, same rounding


def test_jit_grad_and_emulate(rng):
    a = rng.standard_normal((5, 30)).astype(np.float32)
    b = rng.standard_normal((30, 4)).astype(np.float32)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    loss = lambda x, y: jnp.sum(w * jaxemu.dot(x, y, scheme="ozaki2_f32"))
    ga, gb = jax.jit(jax.grad(loss, argnums=(0, 1)))(a, b)
    w64, a64, b64 = (x.astype(np.float64) for x in (w, a, b))
    ra, rb = w64 @ b64.T, a64.T @ w64
    assert np.all(np.abs(np.asarray(ga) - ra) <= 2.0 ** -23 * (np.abs(w64) @ np.abs(b64.T)))
    assert np.all(np.abs(np.asarray(gb) - rb) <= 2.0 ** -23 * (np.abs(a64.T) @ np.abs(w64)))
    f = jax.jit(jaxemu.emulate(lambda x, y: 2.0 * (x @ y), scheme="ozaki2_f32"))
    np.testing.assert_array_equal(np.asarray(f(a, b)), 2.0 * run(a, b))


# ----------------------------------------------------------------------------
# float64: acceptance, refusal, accuracy against the exact product.

def sample64(law, shape, rng):
    if law == "uniform(-1,1)":
        return rng.uniform(-1.0, 1.0, shape)
    if law == "uniform(0,1)":
        return rng.uniform(0.0, 1.0, shape)
    if law == "normal(0,1)":
        return rng.standard_normal(shape)
    return rng.uniform(-1.0, 1.0, shape) * np.exp2(rng.integers(-16, 16, shape))


def exact_product(a, b):
    """The exact product of float64 matrices (Python integers), rounded once to float64."""
    def ints(x, axis):
        mant, ex = np.frexp(x)
        mi = (mant * 2.0 ** 53).astype(np.int64).astype(object)
        ex = ex.astype(np.int64) - 53
        base = ex.min(axis=axis, keepdims=True)
        return mi * (2 ** (ex - base).astype(object)), base
    ai, ea = ints(a, 1)
    bi, eb = ints(b, 0)
    ci = ai.dot(bi)
    e = (ea + eb).astype(int)
    out = np.empty(ci.shape)
    for idx in np.ndindex(ci.shape):
        out[idx] = float(Fraction(ci[idx]) * Fraction(2) ** int(e[idx]))
    return out


@pytest.mark.parametrize("law", T.LAWS)
def test_f64_error_at_most_dgemm(law, rng):
    a, b = sample64(law, (12, 512), rng), sample64(law, (512, 10), rng)
    ref = exact_product(a, b)
    e64 = T.relerr(a @ b, ref)  # numpy's DGEMM
    with x64():
        c = run(a, b, "ozaki2_f64")
    assert c.dtype == np.float64
    assert T.relerr(c, ref) <= e64, (law, T.relerr(c, ref), e64)


def test_exact_dot_samples_are_the_correctly_rounded_exact_products(rng):
    # The f64 benchmark's reference (jaxemu.testing.exact_dot_samples) against
    # Python rationals, on data whose products are not exact in float64.
    a = rng.standard_normal((6, 300)) * np.exp2(rng.integers(-40, 40, (6, 300)))
    b = rng.standard_normal((300, 5))
    idx = (np.array([0, 1, 5, 3]), np.array([4, 0, 2, 2]))
    got = T.exact_dot_samples(a, b, idx)
    for t, (i, j) in enumerate(zip(*idx)):
        assert got[t] == float(sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a[i], b[:, j])))
    assert T.sampled_relerr(a @ b, idx, got) < 1e-14


def test_f64_exact_on_integers_and_grad(rng):
    a = rng.integers(-2 ** 20, 2 ** 20, (6, 300)).astype(np.float64)
    b = rng.integers(-2 ** 20, 2 ** 20, (300, 4)).astype(np.float64)
    with x64():
        np.testing.assert_array_equal(run(a, b, "ozaki2_f64"), a @ b)  # |C| < 2^53: exact
        g = jax.grad(lambda x: jnp.sum(jaxemu.dot(x, b, scheme="ozaki2_f64")))(a)
        assert g.dtype == np.float64
        np.testing.assert_array_equal(np.asarray(g), np.broadcast_to(b.sum(1), a.shape))


def test_dtype_acceptance_and_refusal():
    a32, b32 = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    a64, b64 = a32.astype(np.float64), b32.astype(np.float64)
    with pytest.raises(TypeError, match="a has dtype float64.*ozaki2_f32.*ozaki2_f64"):
        jaxemu.dot(a64, b32, scheme="ozaki2_f32")
    with pytest.raises(TypeError, match="b has dtype float64.*'bf16x6'.*ozaki2_f64"):
        jaxemu.matmul(a32, b64, scheme="bf16x6")
    with x64():
        with pytest.raises(TypeError, match="rhs has dtype float32.*ozaki2_f64.*float64"):
            jaxemu.dot_general(a64, b32, (((1,), (0,)), ((), ())), scheme="ozaki2_f64")
        with pytest.raises(TypeError, match="preferred_element_type must be float64"):
            jaxemu.dot(a64, b64, scheme="ozaki2_f64", preferred_element_type=np.float32)
        np.testing.assert_array_equal(np.asarray(jaxemu.matmul(a64, b64, scheme="ozaki2_f64")), a64 @ b64)
        with pytest.raises(ValueError, match="emulate.*ozaki2_f64.*float64.*ozaki2_f32"):
            jaxemu.emulate(lambda x: x, scheme="ozaki2_f64")
    if not jax.config.jax_enable_x64:
        with pytest.raises(TypeError, match="ozaki2_f64.*jax_enable_x64"):
            jaxemu.dot(a64, b64, scheme="ozaki2_f64")


def test_scheme_validation_and_metadata():
    s = jaxemu.get_scheme("ozaki2_f32")
    assert s.family == "ozaki2" and s.operand_dtype == "float32" and s.fp32_class
    assert s.num_products == s.moduli_for(4096) == s.moduli_for(8192) == s.moduli_for(256) == 8
    assert s.moduli_for(8193) == s.moduli_for(1 << 21) == 9 and s.scaling == "norm"
    f64 = jaxemu.get_scheme("ozaki2_f64")
    assert f64.operand_dtype == "float64" and f64.unit_roundoff == 2.0 ** -53 and f64.num_products == 16
    for bad in (dict(moduli=1), dict(moduli=41), dict(moduli=True), dict(dtype="float16"), dict(target_bits=31),
                dict(scaling="rows")):
        with pytest.raises(ValueError, match="ozaki2_f32"):
            s.replace(**bad)
    assert jaxemu.backends.backend_for("ozaki2_f32", "cuda") == "xla"  # no int8 kernel yet
    assert jaxemu.info().backend_per_scheme["ozaki2_f32"] == "xla"


def _eqns(jaxpr):
    """Every equation of a jaxpr and of the jaxprs inside its equations."""
    for eqn in jaxpr.eqns:
        yield eqn
        for p in eqn.params.values():
            for sub in (p if isinstance(p, (tuple, list)) else (p,)):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _eqns(inner)


def test_row_maxima_are_taken_once_before_the_special_value_conditional(rng):
    """canonical_dot takes Ozaki II's row and column maxima before FP32's
    special-value conditional, which they also decide (NaN/Inf propagate
    through max): the branch for finite data reduces no operand again (on an
    H100 the extra passes had cost 0.6 ms of 9 at 8192^3), the other branch
    takes its own of the operands' finite parts; and the result is the
    product with the maxima computed inside, bit for bit."""
    from jaxemu.backends import xla
    a = rng.standard_normal((48, 80)).astype(np.float32)
    b = rng.standard_normal((80, 40)).astype(np.float32)
    s = jaxemu.get_scheme("ozaki2_f32")
    program = jax.make_jaxpr(lambda a, b: xla.canonical_dot(a[None], b[None], s, "cpu"))(a, b)
    conds = [e for e in _eqns(program.jaxpr) if e.primitive.name == "cond"]
    assert len(conds) == 1
    specials, plain = conds[0].params["branches"]

    def operand_maxima(j):
        return [e for e in _eqns(j.jaxpr) if e.primitive.name == "reduce_max"
                and tuple(e.invars[0].aval.shape) in ((1, 48, 80), (1, 80, 40))]
    assert not operand_maxima(plain) and len(operand_maxima(specials)) >= 2
    c = np.asarray(xla.canonical_dot(jnp.asarray(a)[None], jnp.asarray(b)[None], s, "cpu"))
    np.testing.assert_array_equal(c, np.asarray(xla.ozaki2_dot(jnp.asarray(a)[None], jnp.asarray(b)[None], s)))
