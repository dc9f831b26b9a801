"""Splits: slices reassemble the input exactly where the scheme is exact, and
within the scheme's stated bound where not."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxemu
from jaxemu.backends import xla

FLT_MAX = np.finfo(np.float32).max


def wide_normals(rng, n=4096):
    """Normal f32 values over the exponent range whose split residuals are
    normal too (|x| >= 2^-100: XLA's CPU flushes subnormal arithmetic to
    zero), plus edge values."""
    e = rng.integers(-100, 127, n)
    x = rng.uniform(1.0, 2.0, n) * np.exp2(e.astype(np.float64)) * rng.choice([-1, 1], n)
    edge = [FLT_MAX, -FLT_MAX, np.float32(1.0) - np.float32(2**-24), 2.0**-100, 1.0, -3.0,
            np.nextafter(np.float32(FLT_MAX), np.float32(0))]
    return np.concatenate([x.astype(np.float32), np.array(edge, np.float32)])


def split(x, name, axis=None):
    s = jaxemu.get_scheme(name)
    sl, e = jax.jit(lambda x: xla.split_float(x, s, axis=axis))(x)
    return s, sl, e


@pytest.mark.parametrize("name", ["bf16x6", "bf16x9"])
def test_three_bf16_slices_are_exact_for_normal_values(name, rng):
    x = wide_normals(rng)
    s, sl, _ = split(jnp.asarray(x), name)
    for h in sl:  # every slice is a bf16 value
        h = np.asarray(h)
        assert np.array_equal(h, np.asarray(h.astype(jnp.bfloat16), np.float32))
        assert np.all(np.isfinite(h))  # no overflow, even at FLT_MAX
    np.testing.assert_array_equal(xla.reassemble(sl, s), x.astype(np.float64))


def test_tiny_values_lose_at_most_subnormal_bits(rng):
    # Below 2^-100 the residuals are subnormal: bf16's subnormal grid is 2^-133
    # and XLA's CPU flushes subnormal arithmetic, so bits under 2^-126 may go.
    x = (rng.uniform(-1, 1, 1000) * np.exp2(rng.integers(-140, -100, 1000))).astype(np.float32)
    s, sl, _ = split(jnp.asarray(x), "bf16x6")
    err = np.abs(xla.reassemble(sl, s) - x.astype(np.float64))
    assert err.max() <= 2.0**-126


def test_two_bf16_slices_hold_17_bits(rng):
    x = wide_normals(rng)
    s, sl, _ = split(jnp.asarray(x), "bf16x3")
    rel = np.abs(xla.reassemble(sl, s) - x) / np.abs(x.astype(np.float64))
    assert rel.max() <= 2.0**-17


def test_two_tf32_slices_are_within_one_f32_ulp(rng):
    x = wide_normals(rng)
    s, sl, _ = split(jnp.asarray(x), "tf32x3")
    for h in sl:  # tf32 values: low 13 mantissa bits clear
        bits = np.asarray(h).view(np.uint32)
        assert np.all(bits & 0x1FFF == 0)
    err = np.abs(xla.reassemble(sl, s) - x)
    # One ulp; two at the very top, where hi is truncated instead of rounded up to Inf.
    ulp = np.ldexp(1.0, np.frexp(x.astype(np.float64))[1] - 24)  # f32 ulp, computed in f64 (no overflow at FLT_MAX)
    assert np.all(err <= ulp * np.where(np.abs(x) > 2.0**127, 2, 1))


@pytest.mark.parametrize("name,bound", [("fp16x3", 2.0**-22), ("fp16x3_bitcut", 2.0**-20)])
def test_fp16_slices_with_row_scaling(name, bound, rng):
    # Rows spanning 10 binades, some rows huge, some tiny: scaling brings each
    # into fp16's range; every slice is an fp16 value; reassembly within bound.
    # (Values far below their row's maximum lose bits: that is what the auto
    # scheme and the int8 fallback exist for.)
    x = rng.uniform(0.5, 1, (16, 256)) * np.exp2(rng.integers(-5, 5, (16, 256)))
    x *= rng.choice([-1, 1], x.shape)
    x *= np.exp2(rng.integers(-100, 100, (16, 1)))
    x = x.astype(np.float32)
    s, sl, e = split(jnp.asarray(x), name, axis=1)
    for h in sl:
        h = np.asarray(h)
        assert np.abs(h).max() < 65504
        assert np.array_equal(h, h.astype(np.float16).astype(np.float32))
    rel = np.abs(xla.reassemble(sl, s, e) - x) / np.abs(x.astype(np.float64))
    assert rel.max() <= bound


def test_bitcut_hi_is_a_truncation(rng):
    x = rng.uniform(-1000, 1000, 1000).astype(np.float32)
    _, sl, e = split(jnp.asarray(x[None]), "fp16x3_bitcut", axis=1)
    hi = np.asarray(sl[0]) * np.exp2(-np.asarray(e, np.float64))
    assert np.all(np.abs(hi) <= np.abs(x))  # toward zero
    assert np.all(np.sign(hi) * np.sign(x) >= 0)


@pytest.mark.parametrize("n_slices,bound", [(2, 2.0**-14), (3, 2.0**-21)])
def test_int8_fixed_point_slices(n_slices, bound, rng):
    x = rng.standard_normal((8, 4, 32)).astype(np.float32) * np.exp2(rng.integers(-30, 30, (8, 4, 1)))
    s = jaxemu.get_scheme("int8_l4")
    sl, E, ok = xla.split_int8(jnp.asarray(x), s, n_slices, tile_axis=2)
    for q in sl:
        q = np.asarray(q)
        assert q.dtype == np.int8 and np.abs(q.astype(int)).max() <= 64
    w = [2.0**-6, 2.0**-13, 2.0**-20]
    y = sum(np.asarray(q, np.float64) * w[i] for i, q in enumerate(sl))
    y = y * np.exp2(np.asarray(E, np.float64))
    scale = np.exp2(np.asarray(E, np.float64))  # the tile's 2^E >= its max |x|
    assert np.all(np.abs(y - x) <= bound * scale)
    assert np.all(np.asarray(ok))  # normal data spread << 16 binades... per tile
