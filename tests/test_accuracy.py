"""Accuracy of every scheme against the float64 product, relative to FP32's
own error on the same inputs (DESIGN.md 6)."""
import jax
import pytest

import jaxemu
from jaxemu import testing as T

# FP64 schemes (ozaki2_f64) take float64 operands: tests/test_ozaki.py has them.
SCHEMES = [n for n in jaxemu.schemes() if n not in ("fp32", "auto")
           and jaxemu.get_scheme(n).operand_dtype == "float32"]
M = N = 32


def errors(name, law, k, seed):
    a, b = T.operands(law, M, k, N, seed)
    ref = T.reference(a, b)
    e32 = T.relerr(jaxemu.dot(a, b, scheme="fp32"), ref)
    e = T.relerr(jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=name))(a, b), ref)
    return e, e32


def check(name, e, e32):
    s = jaxemu.get_scheme(name)
    if s.fp32_class:
        assert e <= 2.0 * e32, f"{name}: error {e:.3g} > 2 x FP32's {e32:.3g}"
    else:
        assert e <= s.error_bound(), f"{name}: error {e:.3g} > its bound {s.error_bound():.3g}"


@pytest.mark.parametrize("law", T.LAWS)
@pytest.mark.parametrize("name", SCHEMES)
def test_accuracy_per_law(name, law, rng):
    e, e32 = errors(name, law, 1024, int(rng.integers(1 << 30)))
    check(name, e, e32)


@pytest.mark.parametrize("k", [256, 4096])
@pytest.mark.parametrize("name", SCHEMES)
def test_accuracy_per_k(name, k, rng):
    e, e32 = errors(name, "uniform(-1,1)", k, int(rng.integers(1 << 30)))
    check(name, e, e32)


@pytest.mark.parametrize("name", ["bf16", "fp16", "tf32", "bf16x3", "int8_l1"])
def test_reduced_schemes_really_round(name, rng):
    # Guards against a split that XLA optimised away (DESIGN.md 2.2): a
    # reduced scheme must be measurably worse than FP32.
    e, e32 = errors(name, "uniform(-1,1)", 1024, int(rng.integers(1 << 30)))
    assert e > 5 * e32


def test_promotion_interval_changes_the_summation_but_not_the_accuracy_class(rng):
    a, b = T.operands("uniform(-1,1)", M, 3000, N, int(rng.integers(1 << 30)))
    ref = T.reference(a, b)
    e32 = T.relerr(jaxemu.dot(a, b, scheme="fp32"), ref)
    for kc in (None, 1, 7, 256, 3000, 5000):
        s = jaxemu.get_scheme("bf16x6").replace(kc=kc)
        assert T.relerr(jaxemu.dot(a, b, scheme=s), ref) <= 2 * e32


def test_int8_fallback_is_visible_and_keeps_accuracy_on_wide_data(rng):
    a, b = T.operands("wide-exp", M, 512, N, int(rng.integers(1 << 30)))
    st = jaxemu.int8_fallback_stats(a, b, "int8_l4")
    assert st["fallback_fraction"] > 0.9  # 32 binades per tile: over max_spread
    ref = T.reference(a, b)
    e32 = T.relerr(jaxemu.dot(a, b, scheme="fp32"), ref)
    assert T.relerr(jaxemu.dot(a, b, scheme="int8_l4"), ref) <= 2 * e32
    # Without the fallback, per-tile fixed point loses accuracy on such data.
    no_fb = jaxemu.get_scheme("int8_l4").replace(max_spread=40)
    assert jaxemu.int8_fallback_stats(a, b, no_fb)["fallback_fraction"] < 0.05
    assert T.relerr(jaxemu.dot(a, b, scheme=no_fb), ref) > 4 * e32


def test_int8_rarely_falls_back_on_ordinary_data(rng):
    a, b = T.operands("normal(0,1)", M, 1024, N, int(rng.integers(1 << 30)))
    assert jaxemu.int8_fallback_stats(a, b, "int8_l4")["fallback_fraction"] < 0.01
