"""The auto scheme: safe on adversarial data, fastest safe choice, FP32 where
emulation does not pay."""
import jax
import numpy as np
import pytest

import jaxemu
from jaxemu import testing as T

# Thresholds off and the device-independent cost model, so that small CPU
# problems exercise the data-dependent choice.
AUTO = jaxemu.get_scheme("auto").replace(min_flops=0.0, min_dim=0, block=32, cost_model="counts")
auto_dot = jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme=AUTO))  # one compilation per shape, shared


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
    elif kind == "half the rows wide":  # the hybrid: 48 rows for fp16x3, 48 for bf16x6
        a[rng.permutation(m)[: m // 2]] *= np.exp2(rng.integers(-40, 40, (m // 2, k)))
    elif kind == "half the columns wide":
        b[:, rng.permutation(n)[: n // 2]] *= np.exp2(rng.integers(-40, 40, (k, n // 2)))
    elif kind == "subnormals and zero rows":
        a[3] = 0.0
        a[5, :20] = 1e-40
        b[:, 4] = 0.0
        b[:30, 6] = 3e-39
    return a.astype(np.float32), b.astype(np.float32)


KINDS = ["block magnitudes", "row magnitudes", "tiny partners", "half the rows wide", "half the columns wide",
         "subnormals and zero rows", "plain"]


@pytest.mark.parametrize("kind", KINDS)
def test_auto_is_never_worse_than_bf16x6s_bound(kind, rng):
    a, b = adversarial(kind, rng)
    ref, b6 = bound(a, b)
    c = auto_dot(a, b)
    assert T.componentwise_err(c, a, b, ref) <= b6


def test_auto_with_nan_inf_islands_matches_fp32s_pattern(rng):
    from test_special_values import ieee_reference
    a, b = adversarial("plain", rng)
    a[10:14, 20:24] = np.inf
    a[40, 50] = np.nan
    b[100:103, 5:8] = -np.inf
    ref = ieee_reference(a, b)
    c = np.asarray(auto_dot(a, b), np.float64)
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
    # ... and the hybrid runs fp16x3 on the 64 safe rows, bf16x6 on the rest.
    assert rep["scheme"] == "fp16x3+bf16x6" and rep["split"] == dict(side="rows", fp16x3=64, of=128)
    rep = jaxemu.auto_report(inrange, half.T, AUTO)
    assert rep["scheme"] == "fp16x3+bf16x6" and rep["split"] == dict(side="cols", fp16x3=64, of=128)
    # 40 safe rows of 128: the largest split point they fill is 32 (a multiple of block).
    few = wide.copy()
    few[np.arange(0, 128, 3)[:40]] = inrange[:40]
    assert jaxemu.auto_report(few, inrange.T, AUTO)["split"] == dict(side="rows", fp16x3=32, of=128)


def test_the_hybrid_runs_each_row_with_its_scheme(rng):
    """Rows given to fp16x3 agree with pure fp16x3, the others with pure
    bf16x6, and C's rows come back in place; in a batch the split is the one
    every batch element allows."""
    inrange = (rng.choice([-1, 1], (3, 128, 160)) * np.exp2(rng.uniform(-8, 0, (3, 128, 160)))).astype(np.float32)
    wide = T.sample("wide-exp", (3, 128, 160), rng)
    safe = [np.sort(rng.permutation(128)[:n]) for n in (70, 100, 128)]  # 70 safe rows in the worst element
    a = wide.copy()
    for i, rows in enumerate(safe):
        a[i, rows] = inrange[i, rows]
    b = rng.uniform(-1, 1, (3, 160, 96)).astype(np.float32)
    c = np.asarray(auto_dot(a, b), np.float64)
    c16 = np.asarray(jaxemu.matmul(a, b, scheme="fp16x3"), np.float64)
    c6 = np.asarray(jaxemu.matmul(a, b, scheme="bf16x6"), np.float64)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    scale = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    tol = 2.0**-24 * scale
    for i, rows in enumerate(safe):
        fast = rows[:64]  # split 64 = 70 rounded down to block 32; the stable sort keeps row order
        rest = np.setdiff1d(np.arange(128), fast)
        assert np.all(np.abs(c[i, fast] - c16[i, fast]) <= tol[i, fast])
        assert np.all(np.abs(c[i, rest] - c6[i, rest]) <= tol[i, rest])
    assert T.componentwise_err(c, a, b, ref) <= 2 * T.componentwise_err(np.matmul(a, b), a, b, ref)


def test_auto_runs_fp32_where_emulation_does_not_pay_and_explain_says_so():
    from jaxemu.auto import size_choice
    auto = jaxemu.get_scheme("auto")  # no cost model for the CPU here: the thresholds decide
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
