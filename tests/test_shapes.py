"""Odd shapes, zero-sized dims and dot_general dimension numbers."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxemu
from jaxemu.testing import dot_general_reference as np_dot_general

# FP64 schemes (ozaki2_f64) take float64 operands: tests/test_ozaki.py has them.
SCHEMES = [n for n in jaxemu.schemes() if n != "auto"
           and jaxemu.get_scheme(n).operand_dtype == "float32"]


def within_bound(c, lhs, rhs, dn, name):
    """Elementwise worst-case bound: |C - C64| <= (K + 2) u |A||B|."""
    ref = np_dot_general(lhs.astype(np.float64), rhs.astype(np.float64), dn)
    absab = np_dot_general(np.abs(lhs.astype(np.float64)), np.abs(rhs.astype(np.float64)), dn)
    (lc, _), _ = dn
    k = int(np.prod([lhs.shape[d] for d in lc])) if lc else 1
    u = max(jaxemu.get_scheme(name).unit_roundoff, 2.0**-24)
    c = np.asarray(c, np.float64)
    assert c.shape == ref.shape
    np.testing.assert_array_less(np.abs(c - ref), (k + 2) * u * absab + 1e-30)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 1, 17), (1, 129, 1), (17, 7, 129), (3, 1031, 5)])
@pytest.mark.parametrize("name", SCHEMES)
def test_odd_shapes(name, m, k, n, rng):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    # kc and ktile that do not divide K exercise the padding.
    s = jaxemu.get_scheme(name)
    if getattr(s, "kc", None):
        s = s.replace(kc=64)
    c = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=s))(a, b)
    within_bound(c, a, b, (((1,), (0,)), ((), ())), name)


@pytest.mark.parametrize("shape_a,shape_b", [((0, 5), (5, 3)), ((4, 0), (0, 3)), ((4, 5), (5, 0)),
                                             ((2, 0, 5), (2, 5, 3))])
@pytest.mark.parametrize("name", ["bf16x6", "fp16x3", "int8_l4", "fp32"])
def test_zero_sized_dims(name, shape_a, shape_b):
    a, b = np.ones(shape_a, np.float32), np.ones(shape_b, np.float32)
    c = np.asarray(jaxemu.matmul(a, b, scheme=name))
    expect = np.matmul(a, b)
    assert c.shape == expect.shape and np.all(c == expect)  # K = 0 gives zeros


DNS = [
    # (lhs shape, rhs shape, dimension numbers)
    ((6, 5), (6, 4), (((0,), (0,)), ((), ()))),            # lhs transposed
    ((5, 6), (4, 6), (((1,), (1,)), ((), ()))),            # rhs transposed
    ((3, 5, 6), (3, 6, 4), (((2,), (1,)), ((0,), (0,)))),  # batched
    ((5, 3, 6), (6, 4, 3), (((2,), (0,)), ((1,), (2,)))),  # batch dims in the middle/end
    ((4, 5, 6), (6, 5, 3), (((1, 2), (1, 0)), ((), ()))),  # two contracting dims
    ((2, 3, 4, 5), (3, 5, 2, 7), (((3,), (1,)), ((0, 1), (2, 0)))),  # rank 4, two batch dims
    ((6,), (6,), (((0,), (0,)), ((), ()))),                # vector . vector
    ((6,), (6, 4), (((0,), (0,)), ((), ()))),              # vector . matrix
    ((2, 6), (3,), (((), ()), ((), ()))),                  # outer product (K = 1)
]


@pytest.mark.parametrize("sa,sb,dn", DNS)
@pytest.mark.parametrize("name", ["bf16x6", "fp16x3", "int8_l4", "tf32x3"])
def test_dimension_numbers(name, sa, sb, dn, rng):
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    c = jaxemu.dot_general(a, b, dn, scheme=name)
    assert c.shape == jax.lax.dot_general(a, b, dn).shape
    within_bound(c, a, b, dn, name)


def test_matmul_broadcasting_matches_numpy(rng):
    cases = [((5, 4), (4, 3)), ((2, 5, 4), (4, 3)), ((5, 4), (2, 4, 3)), ((2, 1, 5, 4), (3, 4, 6)),
             ((4,), (4, 3)), ((5, 4), (4,)), ((2, 5, 4), (4,))]
    for sa, sb in cases:
        a = rng.standard_normal(sa).astype(np.float32)
        b = rng.standard_normal(sb).astype(np.float32)
        c = np.asarray(jaxemu.matmul(a, b, scheme="bf16x6"), np.float64)
        ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
        assert c.shape == ref.shape
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)


def test_dot_follows_jnp_dot(rng):
    for sa, sb in [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)), ((2, 3, 4), (5, 4, 6))]:
        a = rng.standard_normal(sa).astype(np.float32)
        b = rng.standard_normal(sb).astype(np.float32)
        ref = np.dot(a.astype(np.float64), b.astype(np.float64))
        c = np.asarray(jaxemu.dot(a, b), np.float64)
        assert c.shape == ref.shape
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)


def test_low_precision_inputs_are_promoted_exactly_and_outputs_cast(rng):
    a = jnp.asarray(rng.standard_normal((8, 16)), jnp.bfloat16)
    b = jnp.asarray(rng.standard_normal((16, 4)), jnp.float16)
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    c = jaxemu.dot(a, b, scheme="bf16x6")
    assert c.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(c), ref, rtol=1e-5, atol=1e-5)
    c16 = jaxemu.dot(a, b, scheme="bf16x6", preferred_element_type=jnp.bfloat16)
    assert c16.dtype == jnp.bfloat16
