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
    elif kind == "both sides tiny":  # products near 2^-110: bf16x6's low slice products would flush
        a *= 2.0**-55
        b *= 2.0**-55
        a[0, 0] *= 2.0**30  # one wide row and column (not fp16x3-safe) so that bf16x6 is in play
        b[0, 0] *= 2.0**30
    elif kind == "slices rounding up to overflow":  # (2^64 - ulp)^2 is finite; bf16(2^64 - ulp)^2 is not
        big = np.nextafter(np.float32(2.0**64), np.float32(0))
        a[0, :], b[:, 0] = 0.0, 0.0
        a[0, 0], a[0, 1], b[0, 0], b[1, 0] = big, 2.0**-40, big, 2.0**-40
    elif kind == "subnormals and zero rows":
        a[3] = 0.0
        a[5, :20] = 1e-40
        b[:, 4] = 0.0
        b[:30, 6] = 3e-39
    return a.astype(np.float32), b.astype(np.float32)


KINDS = ["block magnitudes", "row magnitudes", "tiny partners", "half the rows wide", "half the columns wide",
         "both sides tiny", "slices rounding up to overflow", "subnormals and zero rows", "plain"]


@pytest.mark.parametrize("kind", KINDS)
def test_auto_is_never_worse_than_bf16x6s_bound(kind, rng):
    a, b = adversarial(kind, rng)
    ref, b6 = bound(a, b)
    c = auto_dot(a, b)
    assert T.componentwise_err(c, a, b, ref) <= b6


@pytest.mark.parametrize("kind", ["plain", "half the rows wide"])  # a pure and a hybrid run
def test_auto_with_nan_inf_islands_matches_fp32s_pattern(kind, rng):
    from test_special_values import ieee_reference
    a, b = adversarial(kind, rng)
    a[10:14, 20:24] = np.inf
    a[40, 50] = np.nan
    b[100:103, 5:8] = -np.inf
    assert jaxemu.auto_report(a, b, AUTO)["scheme"] == ("fp16x3" if kind == "plain" else "fp16x3+bf16x6")
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
    assert rep["scheme"] == "fp16x3+bf16x6" and rep["split"] == dict(rows=64, cols=128, of=(128, 128))
    rep = jaxemu.auto_report(inrange, half.T, AUTO)
    assert rep["scheme"] == "fp16x3+bf16x6" and rep["split"] == dict(rows=128, cols=64, of=(128, 128))
    # 40 safe rows of 128: the largest split point they fill is 32 (a multiple of block).
    few = wide.copy()
    few[np.arange(0, 128, 3)[:40]] = inrange[:40]
    assert jaxemu.auto_report(few, inrange.T, AUTO)["split"] == dict(rows=32, cols=128, of=(128, 128))
    # Both sides mixed (APE's Figure 8 setting): fp16x3 on the safe rows x safe columns.
    rows_ok = np.arange(128) % 4 != 0  # 96 safe rows and columns: the 3/4 split
    a2, b2 = wide.copy(), wide.T.copy()
    a2[rows_ok], b2[:, rows_ok] = inrange[rows_ok], inrange[rows_ok].T
    assert jaxemu.auto_report(a2, b2, AUTO)["split"] == dict(rows=96, cols=96, of=(128, 128))


def test_the_hybrid_runs_each_row_with_its_scheme(rng):
    """Rows given to fp16x3 agree with pure fp16x3, the others with pure
    bf16x6, and C's rows come back in place; in a batch the split is the one
    every batch element allows. (Two-sided splits: test_two_sided_hybrid.)"""
    inrange = (rng.choice([-1, 1], (3, 128, 160)) * np.exp2(rng.uniform(-8, 0, (3, 128, 160)))).astype(np.float32)
    wide = T.sample("wide-exp", (3, 128, 160), rng)
    safe = [np.sort(rng.permutation(128)[:n]) for n in (70, 100, 128)]  # 70 safe rows in the worst element
    a = wide.copy()
    for i, rows in enumerate(safe):
        a[i, rows] = inrange[i, rows]
    b = rng.uniform(-1, 1, (3, 160, 96)).astype(np.float32)
    c = np.asarray(auto_dot(a, b))
    # By hand, on the branch's shapes: fp16x3 on the first 64 safe rows of each
    # element (64 = the 70 of the worst element, rounded down to block 32), bf16x6
    # on the other 64.
    fast = np.stack([rows[:64] for rows in safe])
    rest = np.stack([np.setdiff1d(np.arange(128), f) for f in fast])
    take = lambda x, idx: np.take_along_axis(x, idx[:, :, None], axis=1)  # noqa: E731
    np.testing.assert_array_equal(take(c, fast), jaxemu.matmul(take(a, fast), b, scheme="fp16x3"))
    np.testing.assert_array_equal(take(c, rest), jaxemu.matmul(take(a, rest), b, scheme="bf16x6"))
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert T.componentwise_err(c, a, b, ref) <= 2 * T.componentwise_err(np.matmul(a, b), a, b, ref)


def test_two_sided_hybrid(rng):
    """Safe rows x safe columns run fp16x3, every other entry bf16x6, in place."""
    m, k, n = 128, 96, 128
    a = T.sample("wide-exp", (m, k), rng)
    b = T.sample("wide-exp", (k, n), rng)
    rows = np.sort(rng.permutation(m)[:80])   # 80 safe rows -> split 64 (1/2 of 128)
    cols = np.sort(rng.permutation(n)[:100])  # 100 safe columns -> split 96 (3/4)
    a[rows] = rng.uniform(-1, 1, (80, k))
    b[:, cols] = rng.uniform(-1, 1, (k, 100))
    assert jaxemu.auto_report(a, b, AUTO)["split"] == dict(rows=64, cols=96, of=(m, n))
    c = np.asarray(auto_dot(a, b))
    # The same three products by hand, on the same sub-shapes (so the same
    # summation order): fp16x3 on the first 64 safe rows x first 96 safe
    # columns (stable gathers keep index order), bf16x6 elsewhere.
    r, q = rows[:64], cols[:96]
    other_r, other_q = np.setdiff1d(np.arange(m), r), np.setdiff1d(np.arange(n), q)
    np.testing.assert_array_equal(c[np.ix_(r, q)], jaxemu.dot(a[r], b[:, q], scheme="fp16x3"))
    np.testing.assert_array_equal(c[np.ix_(r, other_q)], jaxemu.dot(a[r], b[:, other_q], scheme="bf16x6"))
    np.testing.assert_array_equal(c[other_r], jaxemu.dot(a[other_r], b, scheme="bf16x6"))
    ref = T.reference(a, b)
    assert T.componentwise_err(c, a, b, ref) <= 2 * T.componentwise_err(a @ b, a, b, ref)


def test_auto_runs_fp32_where_emulation_does_not_pay_and_explain_says_so():
    from jaxemu.auto import plan
    auto = jaxemu.get_scheme("auto")  # no cost model for the CPU here: the thresholds decide
    thin = plan(1, 256, 8192, 65536, auto)
    assert thin.static == "fp32" and "too thin" in thin.reason    # M = 256: too thin
    assert plan(1, 8192, 8192, 8192, auto).static is None         # large: decided by the data
    a = np.ones((256, 8192), np.float32)
    b = np.ones((8192, 512), np.float32)
    rep = jaxemu.auto_report(a, b)
    assert rep["scheme"] == "fp32" and "too small" in rep["reason"]
    ex = jaxemu.explain(lambda a, b: a @ b, a, b, scheme="auto")
    assert "auto runs fp32 here" in ex[0].reason
    small = np.ones((64, 64), np.float32)
    assert "too small" in jaxemu.auto_report(small, small)["reason"]
