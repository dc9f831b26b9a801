"""The jaxemu_dot primitive under JAX transformations: jit, vmap, jvp, grad,
vjp, linearize, jacfwd, jacrev, hessian; results against float64."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxemu

SCHEMES = ["bf16x6", "fp16x3", "int8_l4"]
TOL = 3e-6  # relative, for FP32-class schemes on these small problems


def f64(x):
    return np.asarray(x, np.float64)


def close(x, ref, tol=TOL):
    x, ref = f64(x), f64(ref)
    assert x.shape == ref.shape
    scale = max(np.abs(ref).max(), 1e-30)
    assert np.abs(x - ref).max() <= tol * scale * 10, (np.abs(x - ref).max(), scale)


@pytest.fixture
def ab(rng):
    return (rng.standard_normal((6, 9)).astype(np.float32), rng.standard_normal((9, 5)).astype(np.float32))


@pytest.mark.parametrize("name", SCHEMES)
def test_jit_and_eager_agree_bitwise(name, ab):
    a, b = ab
    c1 = jaxemu.dot(a, b, scheme=name)
    c2 = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=name))(a, b)
    np.testing.assert_array_equal(np.asarray(c1), np.asarray(c2))
    close(c1, f64(a) @ f64(b))


@pytest.mark.parametrize("name", SCHEMES)
@pytest.mark.parametrize("axes", [(0, None), (None, 1), (0, 0), (1, 2), (2, 0)])
def test_vmap_any_axis(name, axes, rng):
    a = rng.standard_normal((4, 6, 9)).astype(np.float32)
    b = rng.standard_normal((9, 5, 4)).astype(np.float32)
    la, lb = axes
    a_in = a if la is not None else a[0]
    b_in = np.moveaxis(b, 2, lb) if lb is not None else b[..., 0]
    if la is not None:
        a_in = np.moveaxis(a, 0, la)
    out = jax.vmap(lambda x, y: jaxemu.dot(x, y, scheme=name), in_axes=(la, lb))(a_in, b_in)
    ref = jax.vmap(lambda x, y: jnp.dot(f64(x), f64(y)) if False else x @ y, in_axes=(la, lb))(
        jnp.asarray(a_in), jnp.asarray(b_in))
    close(out, ref, tol=1e-5)
    # And the vmapped jaxpr folds the batch into one jaxemu_dot (no loop).
    jaxpr = jax.make_jaxpr(jax.vmap(lambda x, y: jaxemu.dot(x, y, scheme=name), in_axes=(la, lb)))(a_in, b_in)
    assert str(jaxpr).count("jaxemu_dot") == 1 and "while" not in str(jaxpr)


def test_nested_vmap(rng):
    a = rng.standard_normal((3, 4, 6, 9)).astype(np.float32)
    b = rng.standard_normal((4, 9, 5)).astype(np.float32)
    f = jax.vmap(jax.vmap(lambda x, y: jaxemu.dot(x, y), in_axes=(0, 0)), in_axes=(0, None))
    close(f(a, b), np.einsum("ijmk,jkn->ijmn", f64(a), f64(b)))


@pytest.mark.parametrize("name", SCHEMES)
def test_grad_and_vjp(name, ab):
    a, b = ab
    g = np.ones((6, 5))
    ga, gb = jax.grad(lambda a, b: jnp.sum(jaxemu.dot(a, b, scheme=name)), (0, 1))(a, b)
    close(ga, g @ f64(b).T)
    close(gb, f64(a).T @ g)
    out, vjp = jax.vjp(lambda a, b: jaxemu.dot(a, b, scheme=name), a, b)
    ct = np.arange(30, dtype=np.float32).reshape(6, 5)
    va, vb = vjp(ct)
    close(va, f64(ct) @ f64(b).T)
    close(vb, f64(a).T @ f64(ct))


def test_cotangent_products_are_emulated_with_the_same_scheme(ab):
    a, b = ab
    jaxpr = str(jax.make_jaxpr(jax.grad(lambda a, b: jnp.sum(jaxemu.dot(a, b, scheme="fp16x3")), (0, 1)))(a, b))
    assert jaxpr.count("jaxemu_dot") == 3 and "dot_general" not in jaxpr
    assert jaxpr.count("scheme=fp16x3") == 3


@pytest.mark.parametrize("name", SCHEMES)
def test_jvp_linearize_jacobians_hessian(name, ab):
    a, b = ab
    f = lambda a: jaxemu.dot(a, b, scheme=name)
    ta = np.ones_like(a)
    y, t = jax.jvp(f, (a,), (ta,))
    close(t, f64(ta) @ f64(b))
    y2, lin = jax.linearize(f, a)
    close(lin(ta), f64(ta) @ f64(b))
    jf, jr = jax.jacfwd(f)(a), jax.jacrev(f)(a)
    ref = np.einsum("mi,kn->mnik", np.eye(6), f64(b))
    close(jf, ref)
    close(jr, ref)
    h = jax.hessian(lambda a: jnp.sum(jaxemu.dot(a, b, scheme=name) ** 2))(a)
    ref_h = 2 * np.einsum("ij,kl->ikjl", np.eye(6), f64(b) @ f64(b).T)
    close(h, ref_h, tol=1e-5)


def test_vmap_of_grad(rng):
    a = rng.standard_normal((3, 6, 9)).astype(np.float32)
    b = rng.standard_normal((9, 5)).astype(np.float32)
    gs = jax.vmap(jax.grad(lambda a: jnp.sum(jaxemu.dot(a, b) ** 2)))(a)
    ref = 2 * (f64(a) @ f64(b)) @ f64(b).T
    close(gs, ref, tol=1e-5)


@pytest.mark.parametrize("dn,sa,sb", [((((1,), (0,)), ((), ())), (4, 3), (3, 5)),
                                      ((((2,), (2,)), ((0,), (0,))), (2, 4, 3), (2, 5, 3)),
                                      ((((0, 2), (1, 0)), ((), ())), (3, 4, 2), (2, 3, 5))])
def test_check_grads_general_dimension_numbers(dn, sa, sb, rng):
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    check_grads(lambda a, b: jaxemu.dot_general(a, b, dn, scheme="bf16x9"), (a, b), order=2,
                modes=["fwd", "rev"], atol=2e-2, rtol=2e-2)


def test_default_scheme_context_is_read_at_trace_time(ab):
    a, b = ab
    with jaxemu.default_scheme("bf16"):
        j = str(jax.make_jaxpr(jaxemu.dot)(a, b))
    assert "scheme=bf16\n" in j or "scheme=bf16 " in j or "scheme=bf16]" in j
    assert jaxemu.current_scheme().name == "bf16x6"  # restored


def test_forced_xla_backend_matches_default_on_cpu(ab):
    a, b = ab
    c1 = jaxemu.dot(a, b, backend="xla")
    with jaxemu.default_backend("xla"):
        c2 = jaxemu.dot(a, b)
    np.testing.assert_array_equal(np.asarray(c1), np.asarray(c2))


def test_b_rows_hint_marks_only_a_k_minor_rhs():
    # The primitive tells the backends (backends.b_rows_free) when its rhs,
    # as laid out, is B^T (B, N, K): then splitting B as rows needs no
    # transpose. A (K, N) rhs, or batch axes out of place, are not.
    from jaxemu import backends
    from jaxemu.dims import dot_shape, rhs_k_minor
    assert rhs_k_minor(dot_shape((8, 4), (6, 4), (((1,), (1,)), ((), ()))))          # x @ y.T, folded
    assert not rhs_k_minor(dot_shape((8, 4), (4, 6), (((1,), (0,)), ((), ()))))      # x @ y
    assert rhs_k_minor(dot_shape((2, 8, 4), (2, 6, 4), (((2,), (2,)), ((0,), (0,)))))
    assert not rhs_k_minor(dot_shape((2, 8, 4), (6, 2, 4), (((2,), (2,)), ((0,), (1,)))))
    assert not rhs_k_minor(dot_shape((8, 4, 3), (6, 3, 4), (((1, 2), (2, 1)), ((), ()))))  # K axes swapped
    seen = []
    real = backends.product_for

    def spy(platform, backend="default"):
        inner = real(platform, backend)

        def product(*args, **kw):
            seen.append(backends.b_rows_are_free())
            return inner(*args, **kw)
        return product
    x, y = jnp.ones((8, 4)), jnp.ones((6, 4))
    try:
        backends.product_for = spy
        jaxemu.dot_general(x, y, (((1,), (1,)), ((), ())), scheme="bf16x3")
        jaxemu.dot_general(x, y.T, (((1,), (0,)), ((), ())), scheme="bf16x3")
    finally:
        backends.product_for = real
    assert seen == [True, False]
    assert not backends.b_rows_are_free()  # (reset after the product)
