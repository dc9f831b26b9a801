"""The auto scheme: safe on adversarial data, fastest safe choice, FP32 where
emulation does not pay."""
import jax
import numpy as np
import pytest

import jaxemu
from jaxemu import testing as T

# Thresholds off, so small CPU problems exercise the data-dependent choice.
AUTO = jaxemu.get_scheme("auto").replace(min_flops=0.0, min_dim=0, block=32)


def bound(a, b):
    """bf16x6's bound, 2 x FP32's own error on the same inputs, entrywise:
    max |C - C64| / (|A||B|). The normwise error would be the wrong statistic
    here: with rows and columns scaled by up to 2^+-60 a handful of entries
    carry all of ||C||_F, so FP32 being lucky on them decides the bound."""
    ref = T.reference(a, b)
    return ref, 2 * T.componentwise_err(jax.lax.dot(a, b, precision="highest"), a, b, ref)


def adversarial(kind, rng, m=96, k=160, n=64):
    a = rng.uniform(-1, 1, (m, k))
    b = rng.uniform(-1, 1, (k, n))
    if kind == "block magnitudes":  # 2^-60 .. 2^60 by 32 x 32 block
        a *= np.exp2(np.kron(rng.integers(-60, 60, (m // 32, k // 32)), np.ones((32, 32))))
        b *= np.exp2(np.kron(rng.integers(-60, 60, (k // 32, n // 32)), np.ones((32, 32))))
    elif kind == "row magnitudes":  # each row its own scale, columns too
        a *= np.exp2(rng.integers(-60, 60, (m, 1)))
        b *= np.exp2(rng.integers(-60, 60, (1, n)))
    elif kind == "tiny partners":  # a tiny value meets a huge one
        a[:, 7] *= 2.0**-40
        b[7, :] *= 2.0**40
    elif kind == "subnormals and zero rows":
        a[3] = 0.0
        a[5, :20] = 1e-40
        b[:, 4] = 0.0
        b[:30, 6] = 3e-39
    return a.astype(np.float32), b.astype(np.float32)


@pytest.mark.parametrize("kind", ["block magnitudes", "row magnitudes", "tiny partners", "subnormals and zero rows",
                                  "plain"])
def test_auto_is_never_worse_than_bf16x6s_bound(kind, rng):
    a, b = adversarial(kind, rng)
    ref, b6 = bound(a, b)
    c = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=AUTO))(a, b)
    assert T.componentwise_err(c, a, b, ref) <= b6


def test_auto_with_nan_inf_islands_matches_fp32s_pattern(rng):
    from test_special_values import ieee_reference
    a, b = adversarial("plain", rng)
    a[10:14, 20:24] = np.inf
    a[40, 50] = np.nan
    b[100:103, 5:8] = -np.inf
    ref = ieee_reference(a, b)
    c = np.asarray(jaxemu.dot(a, b, scheme=AUTO), np.float64)
    np.testing.assert_array_equal(np.isnan(c), np.isnan(ref))
    np.testing.assert_array_equal(np.isposinf(c), np.isposinf(ref))
    np.testing.assert_array_equal(np.isneginf(c), np.isneginf(ref))
    fin = np.isfinite(ref)
    assert np.abs(c[fin] - ref[fin]).max() <= 1e-5 * np.abs(ref[fin]).max()


def test_auto_picks_the_fastest_safe_scheme(rng):
    inrange = (rng.choice([-1, 1], (128, 256)) * np.exp2(rng.uniform(-8, 0, (128, 256)))).astype(np.float32)
    assert jaxemu.auto_report(inrange, inrange.T, AUTO)["scheme"] == "fp16x3"
    wide = T.sample("wide-exp", (128, 256), rng)
    rep = jaxemu.auto_report(wide, inrange.T, AUTO)
    assert rep["scheme"] == "bf16x6" and rep["blocks"]["fp32"] == 0
    extreme = inrange.copy()
    extreme[0, 0] = 2.0**110
    rep = jaxemu.auto_report(extreme, inrange.T, AUTO)
    assert rep["scheme"] == "fp32" and rep["blocks"]["fp32"] == 128 // 32  # one row panel x all 4 column panels
    # Block counts follow mask_C = mask_A x mask_B.
    half = inrange.copy()
    half[:64] = wide[:64]
    rep = jaxemu.auto_report(half, inrange.T, AUTO)
    assert rep["blocks"] == {"fp16x3": 2 * 4, "bf16x6": 2 * 4, "fp32": 0}


def test_auto_runs_fp32_where_emulation_does_not_pay_and_explain_says_so():
    from jaxemu.auto import size_choice
    auto = jaxemu.get_scheme("auto")
    assert size_choice(1, 256, 8192, 65536, auto)[0] == "fp32"  # M = 256: too thin
    assert "too thin" in size_choice(1, 256, 8192, 65536, auto)[1]
    assert size_choice(1, 8192, 8192, 8192, auto)[0] == ""       # large: decided by the data
    a = np.ones((256, 8192), np.float32)
    b = np.ones((8192, 512), np.float32)
    rep = jaxemu.auto_report(a, b)
    assert rep["scheme"] == "fp32" and "too small" in rep["reason"]
    ex = jaxemu.explain(lambda a, b: a @ b, a, b, scheme="auto")
    assert "auto runs fp32 here" in ex[0].reason
    small = np.ones((64, 64), np.float32)
    assert "too small" in jaxemu.auto_report(small, small)["reason"]
