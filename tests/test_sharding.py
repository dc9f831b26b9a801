"""jaxemu under JAX sharding (8 host devices, explicit-sharding meshes):
results equal the single-device ones within the scheme's bound, outputs keep
dot_general's shardings, and the compiled HLO gathers no operand."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import jaxemu
from jaxemu import testing as T

pytestmark = pytest.mark.skipif(len(jax.devices()) < 8, reason="needs 8 devices (XLA_FLAGS, see conftest.py)")

SCHEMES = ["bf16x6", "fp16x3", "int8_l4", "bf16x3"]


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((4, 2), ("x", "y"))


def put(x, mesh, spec):
    return jax.device_put(x, NamedSharding(mesh, spec))


def check(name, c, a, b, dn=(((1,), (0,)), ((), ()))):
    """Within the scheme's bound of float64, as the single-device result is."""
    ref = T.dot_general_reference(a.astype(np.float64), b.astype(np.float64), dn)
    single = jax.jit(lambda a, b: jaxemu.dot_general(a, b, dn, scheme=name))(a, b)
    e, e1 = T.relerr(c, ref), T.relerr(single, ref)
    e32 = T.relerr(jax.lax.dot_general(a, b, dn, precision="highest"), ref)
    s = jaxemu.get_scheme(name)
    bound = 2 * e32 if s.fp32_class else s.error_bound()
    assert e1 <= bound and e <= bound, (e, e1, bound)


def hlo(f, *args):
    return f.lower(*args).compile().as_text()


@pytest.mark.parametrize("name", SCHEMES)
@pytest.mark.parametrize("spec_a,spec_b,out", [
    (P("x", None), P(), P("x", None)),            # rows of A sharded
    (P(), P(None, "y"), P(None, "y")),            # columns of B sharded
    (P("x", None), P(None, "y"), P("x", "y")),    # both free dims
])
def test_free_dims_stay_sharded_without_collectives(name, spec_a, spec_b, out, mesh, rng):
    a = rng.standard_normal((64, 512)).astype(np.float32)
    b = rng.standard_normal((512, 48)).astype(np.float32)
    A, B = put(a, mesh, spec_a), put(b, mesh, spec_b)
    f = jax.jit(lambda x, y: jaxemu.dot(x, y, scheme=name))
    c = f(A, B)
    assert c.sharding.spec == out == jax.jit(jnp.dot)(A, B).sharding.spec
    text = hlo(f, A, B)
    assert "all-gather" not in text and "all-to-all" not in text
    check(name, c, a, b)


@pytest.mark.parametrize("name", SCHEMES)
def test_sharded_contracting_dim_is_a_local_product_plus_psum(name, mesh, rng):
    a = rng.standard_normal((32, 2048)).astype(np.float32)
    b = rng.standard_normal((2048, 24)).astype(np.float32)
    A, B = put(a, mesh, P(None, "x")), put(b, mesh, P("x", None))
    f = jax.jit(lambda x, y: jaxemu.dot(x, y, scheme=name, out_sharding=NamedSharding(mesh, P())))
    text = hlo(f, A, B)
    assert "all-gather" not in text
    assert "all-reduce" in text  # the FP32 sum of the local products
    check(name, f(A, B), a, b)


def test_batch_dims_sharded(mesh, rng):
    a = rng.standard_normal((8, 16, 128)).astype(np.float32)
    b = rng.standard_normal((8, 128, 24)).astype(np.float32)
    A, B = put(a, mesh, P("x", None, None)), put(b, mesh, P("x", None, None))
    f = jax.jit(lambda x, y: jaxemu.matmul(x, y, scheme="bf16x6"))
    c = f(A, B)
    assert c.sharding.spec == P("x", None, None)
    assert "all-gather" not in hlo(f, A, B)
    check("bf16x6", c, a, b, (((2,), (1,)), ((0,), (0,))))


def test_emulate_keeps_the_output_shardings(mesh, rng):
    x = rng.standard_normal((64, 32)).astype(np.float32)
    w1 = rng.standard_normal((32, 64)).astype(np.float32) / 6
    w2 = rng.standard_normal((64, 16)).astype(np.float32) / 8
    X, W1, W2 = put(x, mesh, P("x", None)), put(w1, mesh, P(None, "y")), put(w2, mesh, P("y", None))

    def mlp(x, w1, w2):
        h = jnp.tanh(x @ w1)
        return jnp.dot(h, w2, out_sharding=NamedSharding(mesh, P("x", None)))

    plain = jax.jit(mlp)(X, W1, W2)
    em = jax.jit(jaxemu.emulate(mlp))
    out = em(X, W1, W2)
    assert out.sharding.spec == plain.sharding.spec == P("x", None)
    assert "all-gather" not in hlo(em, X, W1, W2)
    with jax.enable_x64(True):
        ref = np.asarray(mlp(jnp.asarray(x, jnp.float64), jnp.asarray(w1, jnp.float64), jnp.asarray(w2, jnp.float64)))
    assert T.relerr(out, ref) <= 2 * T.relerr(plain, ref) + 1e-7


def test_data_parallel_gradients(mesh, rng):
    # Batch sharded, weights replicated: the weight gradient contracts over the
    # sharded batch, so its product is local + psum (and needs the weight's
    # sharding as its out_sharding on an explicit mesh).
    x = put(rng.standard_normal((64, 32)).astype(np.float32), mesh, P(("x", "y"), None))
    w = put((rng.standard_normal((32, 16)) / 6).astype(np.float32), mesh, P())
    loss = lambda w, x: jnp.mean(jnp.tanh(x @ w) ** 2)
    with jax.set_mesh(mesh):
        g = jax.jit(jax.grad(jaxemu.emulate(loss)))(w, x)
        g32 = jax.jit(jax.grad(loss))(w, x)
        assert g.sharding.spec == g32.sharding.spec
        with jax.enable_x64(True):
            g64 = np.asarray(jax.grad(loss)(jnp.asarray(np.asarray(w), jnp.float64),
                                            jnp.asarray(np.asarray(x), jnp.float64)))
    assert T.relerr(g, g64) <= 2 * T.relerr(g32, g64) + 1e-7
