"""FP32 special-value semantics: NaN and Inf exactly where the FP32 product has
them; zeros, subnormals, FLT_MAX and values beyond fp16's range handled."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxemu
from jaxemu import testing as T

# FP64 schemes (ozaki2_f64) take float64 operands: tests/test_ozaki.py has them.
SCHEMES = [n for n in jaxemu.schemes() if n != "auto"
           and jaxemu.get_scheme(n).operand_dtype == "float32"]
FLT_MAX = np.finfo(np.float32).max
INF, NAN = np.float32(np.inf), np.float32(np.nan)


def planted(rng, m=12, k=40, n=9):
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    a[0, 3] = INF        # row 0: Inf meets b[3, :]
    b[3, 0] = 0.0        # ... Inf * 0 = NaN at C[0, 0]
    a[1, 5] = -INF
    a[1, 6] = INF        # row 1: +Inf and -Inf terms: NaN unless partners vanish
    b[5, 2] = 0.0
    a[2, 7] = NAN        # row 2: NaN everywhere
    a[3, :] = 0.0
    a[3, ::2] = -0.0     # row 3: signed zeros
    b[:, 1] = 0.0        # column 1: zeros (Inf * 0 = NaN in rows 0, 1)
    a[4, 2] = 1e-40      # subnormal
    b[8, 3] = 3e-39      # subnormal
    a[5, 1] = FLT_MAX    # huge but finite products
    b[1, 5] = 0.25
    a[6, :] *= 1e6       # beyond fp16's range
    a[6, 9] = 1e-30      # ... with a tiny value in the same row,
    b[9, 6] = INF        # ... meeting an Inf: FP32 gives +-Inf, not NaN
    b[:, 7] *= 1e-9
    b[20, 8] = -INF      # column 8: -Inf
    return a, b


def ieee_reference(a, b):
    """Float64 sum of the exact terms: IEEE NaN/Inf rules, no overflow here."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.einsum("ik,kj->ij", a.astype(np.float64), b.astype(np.float64))


@pytest.mark.parametrize("name", SCHEMES)
def test_nan_inf_pattern_matches_fp32(name, rng):
    a, b = planted(rng)
    ref = ieee_reference(a, b)
    c = np.asarray(jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=name))(a, b), np.float64)
    np.testing.assert_array_equal(np.isnan(c), np.isnan(ref))
    np.testing.assert_array_equal(np.isposinf(c), np.isposinf(ref))
    np.testing.assert_array_equal(np.isneginf(c), np.isneginf(ref))
    assert np.isnan(ref[0, 0]) and np.isinf(ref[6, 6])  # the planted cases are there
    # Finite entries: within the scheme's elementwise accuracy.
    fin = np.isfinite(ref)
    s = jaxemu.get_scheme(name)
    u = max(s.unit_roundoff, 2.0**-24)
    with np.errstate(invalid="ignore"):
        absab = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    bound = (a.shape[1] + 2) * u * absab[fin] + 2.0**-126
    assert np.all(np.abs(c[fin] - ref[fin]) <= bound)


@pytest.mark.parametrize("name", SCHEMES)
def test_zeros_and_signed_zeros(name):
    a = np.zeros((4, 8), np.float32)
    a[0, ::2] = -0.0
    b = np.ones((8, 3), np.float32)
    c = np.asarray(jaxemu.dot(a, b, scheme=name))
    assert np.all(c == 0) and np.all(np.isfinite(c))


@pytest.mark.parametrize("name", ["bf16x6", "fp16x3", "int8_l4", "tf32x3"])
def test_overflow_to_inf_like_fp32(name):
    a = np.full((2, 4), FLT_MAX, np.float32)
    a[1] = -FLT_MAX
    b = np.full((4, 2), 0.75, np.float32)
    c = np.asarray(jaxemu.dot(a, b, scheme=name))  # 3 * FLT_MAX: overflows in FP32
    assert np.all(np.isposinf(c[0])) and np.all(np.isneginf(c[1]))


@pytest.mark.parametrize("name", SCHEMES + ["auto"])
def test_no_overflow_where_fp32_has_none(name):
    """(2^64 - ulp)^2 is finite in FP32, but a bf16/fp16/tf32 slice of
    2^64 - ulp rounds up to 2^64, whose square is Inf: FP32's value is returned."""
    big = np.nextafter(np.float32(2.0**64), np.float32(0))
    a = np.array([[big, 0.5], [1.0, 2.0]], np.float32)
    b = np.array([[big, 1.0], [0.0, 3.0]], np.float32)
    c = np.asarray(jaxemu.dot(a, b, scheme=name))
    c32 = np.asarray(jax.lax.dot(a, b, precision="highest"))
    assert np.all(np.isfinite(c)), c
    s = jaxemu.get_scheme(name)
    # Each entry is one nonzero term: within the scheme's representation error
    # of FP32's (the repaired ones equal to it); bitcut truncates, never rounds up.
    tol = 2.0**-19 if s.family == "auto" or s.fp32_class else s.error_bound()
    np.testing.assert_allclose(c, c32, rtol=tol)


@pytest.mark.parametrize("name", ["bf16x6", "fp16x3", "int8_l4", "fp16x3_bitcut"])
def test_tiny_and_huge_rows_keep_relative_accuracy(name, rng):
    # Rows and columns at wildly different scales (results stay normal: XLA's
    # CPU flushes subnormal arithmetic, unlike GPUs).
    a = rng.uniform(-1, 1, (6, 64)).astype(np.float32)
    b = rng.uniform(-1, 1, (64, 5)).astype(np.float32)
    a *= np.exp2([[-90], [-60], [0], [40], [80], [110]]).astype(np.float32)
    b *= np.exp2([[-5, 0, 1, -1, 0]]).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    c = np.asarray(jaxemu.dot(a, b, scheme=name), np.float64)
    s = jaxemu.get_scheme(name)
    assert T.componentwise_err(c, a, b, ref) <= 66 * max(s.unit_roundoff, 2.0**-24)


@pytest.mark.parametrize("name", [n for n in SCHEMES if n != "fp32"])
def test_inf_times_subnormal_is_inf_under_jit(name):
    """Inf * 1e-40 is Inf in FP32. XLA's CPU flushes subnormals in float
    arithmetic (and rewrote a bit test into x != 0), so the NaN/Inf pattern
    once gave NaN here under jit (found by tests/test_random.py)."""
    a = np.array([[INF, 1.0], [-INF, 0.0], [1e-40, 2.0]], np.float32)
    b = np.array([[1e-40, -3e-39], [2.0, 1.0]], np.float32)
    c = np.asarray(jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=name))(a, b))
    assert np.isposinf(c[0, 0]) and np.isneginf(c[0, 1]), c
    assert np.isneginf(c[1, 0]) and np.isposinf(c[1, 1]), c
    np.testing.assert_allclose(c[2], [4.0, 2.0], rtol=1e-6)


@pytest.mark.parametrize("name", ["bf16x6", "fp16x3", "bf16x3"])
def test_special_values_cost_no_pass_over_c(name):
    # The special-value rules are decided from the operands before the
    # product (xla.fp32_special_values): one conditional, and no copy of C.
    # (Deciding from C afterwards, with a branch passing C through, made XLA
    # copy C: on an H100, 5.6 of 19.5 ms of the kNN product, 8192 x 128 x 262144.)
    hlo = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=name)).lower(
        jnp.ones((64, 96)), jnp.ones((96, 80))).compile().as_text()
    assert hlo.count("conditional(") == 1, hlo
    assert not re.search(r"f32\[(1,)?64,80\]\{[0-9,]*\} copy\(", hlo), hlo
