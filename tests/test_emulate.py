"""emulate(f): every float32 dot_general in f becomes jaxemu_dot, inside every
control-flow construct; nothing else changes; results within the scheme's
bound of float64; composes with jit, grad, vmap; no retracing."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxemu
from jaxemu import _compat
from jaxemu import testing as T


@pytest.fixture(autouse=True)
def leak_check():
    with jax.checking_leaks():
        yield


def count_prims(closed):
    """Primitive-name counts over a jaxpr and all its sub-jaxprs."""
    counts = {}

    def walk(j):
        for e in j.eqns:
            counts[e.primitive.name] = counts.get(e.primitive.name, 0) + 1
            for v in e.params.values():
                for x in (v if isinstance(v, (tuple, list)) else [v]):
                    if isinstance(x, _compat.ClosedJaxpr):
                        walk(x.jaxpr)
                    elif isinstance(x, _compat.Jaxpr):
                        walk(x)
    walk(closed.jaxpr)
    return counts


def f64_reference(f, *args):
    with jax.enable_x64(True):
        out = f(*jax.tree_util.tree_map(lambda x: jnp.asarray(np.asarray(x, np.float64)), args))
        return jax.tree_util.tree_map(lambda x: np.asarray(x, np.float64), out)


def assert_close_f64(out, ref, rel=2e-6):
    for o, r in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(ref)):
        o = np.asarray(o, np.float64)
        err = np.linalg.norm(o - r) / max(np.linalg.norm(r), 1e-30)
        assert err <= rel, err


# ---------------------------------------------------------------------------
# Every construct, at the jaxpr level.

W = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32) / 3


def everything(x, w, with_while=True):
    y = x @ w                                                        # top level
    y = jax.jit(lambda a: jnp.dot(a, w))(y)                          # jit
    y = jax.lax.cond(y.sum() > 0, lambda a: a @ w, lambda a: a - 1, y)   # cond
    y = jax.lax.switch(1, [lambda a: a, lambda a: jnp.einsum("ij,jk->ik", a, w)], y)  # switch
    y = jax.lax.fori_loop(0, 2, lambda i, a: jnp.tanh(a @ w), y)     # fori (scan)
    if with_while:  # (not reverse-differentiable)
        y = jax.lax.while_loop(lambda c: c[1] < 2, lambda c: (jnp.matmul(c[0], w), c[1] + 1), (y, 0))[0]
    y, _ = jax.lax.scan(lambda c, _: (jnp.tensordot(c, w, axes=1), None), y, None, length=2)  # scan
    y = jax.checkpoint(lambda a: jax.lax.dot_general(a, w, (((1,), (0,)), ((), ()))))(y)  # remat
    y = relu_dot(y, w) + vjp_dot(y, w)                               # custom_jvp, custom_vjp
    return y


@jax.custom_jvp
def relu_dot(a, w):
    return jax.nn.relu(a @ w)


@relu_dot.defjvp
def _relu_dot_jvp(p, t):
    a, w = p
    ta, tw = t
    z = a @ w
    return jax.nn.relu(z), (z > 0) * (ta @ w + a @ tw)


@jax.custom_vjp
def vjp_dot(a, w):
    return a @ w


vjp_dot.defvjp(lambda a, w: (a @ w, (a, w)), lambda r, g: (g @ r[1].T, r[0].T @ g))


def test_every_construct_is_rewritten():
    x = np.ones((4, 8), np.float32)
    before = count_prims(jax.make_jaxpr(everything)(x, W))
    after = count_prims(jax.make_jaxpr(jaxemu.emulate(everything))(x, W))
    assert before.get("dot_general", 0) >= 10
    assert after.get("dot_general", 0) == 0
    assert after["jaxemu_dot"] == before["dot_general"]
    for k in before:  # every other primitive untouched
        if k != "dot_general":
            assert after.get(k) == before[k], k


def test_every_construct_numerically_and_gradients():
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    em = jax.jit(jaxemu.emulate(everything, scheme="bf16x6"))
    assert_close_f64(em(x, W), f64_reference(everything, x, W), rel=2e-5)
    loss = lambda x, w: jnp.sum(everything(x, w, with_while=False) ** 2)
    g = jax.jit(jax.grad(jaxemu.emulate(loss), (0, 1)))(x, W)
    assert_close_f64(g, f64_reference(jax.grad(loss, (0, 1)), x, W), rel=2e-5)


def test_backward_products_are_emulated_both_ways():
    x = np.ones((4, 8), np.float32)
    loss = lambda x, w: jnp.sum(everything(x, w, with_while=False) ** 2)
    for f in (jax.grad(jaxemu.emulate(loss), (0, 1)), jaxemu.emulate(jax.grad(loss, (0, 1)))):
        c = count_prims(jax.make_jaxpr(f)(x, W))
        assert c.get("dot_general", 0) == 0 and c["jaxemu_dot"] > 20


def test_shard_map_body_is_rewritten():
    mesh = jax.make_mesh((1,), ("x",))
    P = jax.sharding.PartitionSpec
    f = jax.jit(jax.shard_map(lambda a, b: a @ b, mesh=mesh, in_specs=(P(), P()), out_specs=P()))
    a, b = np.ones((4, 8), np.float32), W
    c = count_prims(jax.make_jaxpr(jaxemu.emulate(f))(a, b))
    assert c.get("jaxemu_dot") == 1 and c.get("dot_general", 0) == 0
    np.testing.assert_allclose(np.asarray(jaxemu.emulate(f)(a, b)), a @ b, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# Numeric programs against float64.

def mlp(params, x):
    for w, b in params[:-1]:
        x = jax.nn.gelu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def test_mlp_forward_and_backward(rng):
    sizes = [16, 32, 32, 4]
    params = [(rng.standard_normal((m, n)).astype(np.float32) / np.sqrt(m), np.zeros(n, np.float32))
              for m, n in zip(sizes[:-1], sizes[1:])]
    x = rng.standard_normal((10, 16)).astype(np.float32)
    y = rng.standard_normal((10, 4)).astype(np.float32)
    loss = lambda p, x, y: jnp.mean((mlp(p, x) - y) ** 2)
    for name in ("bf16x6", "fp16x3", "int8_l4"):
        em = jax.jit(jax.value_and_grad(jaxemu.emulate(loss, scheme=name)))
        out = em(params, x, y)
        ref = f64_reference(jax.value_and_grad(loss), params, x, y)
        assert_close_f64(out, ref, rel=3e-5 if name == "int8_l4" else 5e-6)


def test_scan_rnn(rng):
    wx = rng.standard_normal((6, 12)).astype(np.float32) / 3
    wh = rng.standard_normal((12, 12)).astype(np.float32) / 4
    xs = rng.standard_normal((20, 3, 6)).astype(np.float32)

    def rnn(wx, wh, xs):
        h, hs = jax.lax.scan(lambda h, x: (jnp.tanh(x @ wx + h @ wh),) * 2, jnp.zeros((3, 12)), xs)
        return jnp.sum(hs ** 2)

    out = jax.jit(jax.value_and_grad(jaxemu.emulate(rnn), (0, 1)))(wx, wh, xs)
    assert_close_f64(out, f64_reference(jax.value_and_grad(rnn, (0, 1)), wx, wh, xs), rel=1e-5)


def test_while_loop_power_iteration(rng):
    q, _ = np.linalg.qr(rng.standard_normal((32, 32)))
    a = (q @ np.diag(np.linspace(1, 10, 32)) @ q.T).astype(np.float32)

    def power(a):
        def body(c):
            v, i = c
            v = a @ v
            return v / jnp.linalg.norm(v), i + 1
        v, _ = jax.lax.while_loop(lambda c: c[1] < 300, body, (jnp.ones(32) / np.sqrt(32), 0))
        return v @ a @ v

    lam = float(jax.jit(jaxemu.emulate(power))(a))
    assert abs(lam - 10.0) <= 1e-5 * 10


def test_cond_and_custom_vjp(rng):
    a = rng.standard_normal((5, 8)).astype(np.float32)
    f = lambda a, w: jnp.sum(jax.lax.cond(a[0, 0] > 0, lambda: vjp_dot(a, w), lambda: relu_dot(a, w)))
    out = jax.jit(jax.value_and_grad(jaxemu.emulate(f), (0, 1)))(a, W)
    assert_close_f64(out, f64_reference(jax.value_and_grad(f, (0, 1)), a, W), rel=5e-6)


def test_attention_from_jax_nn(rng):
    q = rng.standard_normal((2, 7, 4, 16)).astype(np.float32)
    f = lambda q: jax.nn.dot_product_attention(q, q, q, implementation="xla")
    c = count_prims(jax.make_jaxpr(jaxemu.emulate(f))(q))
    assert c.get("jaxemu_dot", 0) == 2 and c.get("dot_general", 0) == 0
    assert_close_f64(jax.jit(jaxemu.emulate(f))(q), f64_reference(f, q), rel=5e-6)


# ---------------------------------------------------------------------------
# What is left alone.

NO_DOT = [
    lambda x: jnp.sin(x) * 2 + 1,
    lambda x: jnp.cumsum(jnp.sort(x, axis=1), axis=0),
    lambda x: jax.lax.fori_loop(0, 3, lambda i, c: c * 1.5 - i, x),
    lambda x: jax.lax.cond(x.sum() > 0, jnp.exp, jnp.cos, x),
    lambda x: jax.nn.softmax(x) + jax.random.normal(jax.random.PRNGKey(0), x.shape),
    lambda x: jnp.linalg.norm(x) + jnp.max(x),
    lambda x: (x.astype(jnp.bfloat16) @ x.T.astype(jnp.bfloat16)).astype(jnp.float32),  # not f32 x f32
    lambda x: jnp.dot(x, x.T, precision="high"),  # pinned by the caller to less than FP32
    lambda x: jax.lax.dot(x, x.T, precision=jax.lax.DotAlgorithmPreset.BF16_BF16_F32),  # an algorithm
    lambda x: jax.lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(x.shape[1]), x),
]


@pytest.mark.parametrize("i", range(len(NO_DOT)))
def test_changes_nothing_without_f32_dots(i, rng):
    f = NO_DOT[i]
    x = rng.standard_normal((6, 6)).astype(np.float32)
    em = jaxemu.emulate(f)
    with pytest.warns(jaxemu.NothingEmulatedWarning, match="changes (nothing|none)"):
        out = jax.jit(em)(x)
    for a, b in zip(jax.tree_util.tree_leaves(jax.jit(f)(x)), jax.tree_util.tree_leaves(out)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert str(jax.make_jaxpr(f)(x)) == str(jax.make_jaxpr(em)(x))


def test_pinned_precision_can_be_emulated_on_request():
    x = np.ones((3, 3), np.float32)
    for prec in ("high", jax.lax.DotAlgorithmPreset.BF16_BF16_F32):
        f = lambda x: jax.lax.dot(x, x, precision=prec)  # noqa: E731
        assert count_prims(jax.make_jaxpr(jaxemu.emulate(f, emulate_pinned=True))(x)).get("jaxemu_dot") == 1


# ---------------------------------------------------------------------------
# The precision rule: HIGHEST asks for FP32 accuracy, which FP32-class schemes give.

@pytest.mark.parametrize("context", ["highest", "float32"])
def test_default_matmul_precision_highest_is_emulated(context, rng):
    """Under jax.default_matmul_precision("highest") every dot carries
    precision HIGHEST: an FP32-class scheme still rewrites every one, and the
    result matches float64 as in the unpinned case."""
    x = rng.standard_normal((4, 8)).astype(np.float32)
    before = count_prims(jax.make_jaxpr(everything)(x, W))
    with jax.default_matmul_precision(context):
        closed = jax.make_jaxpr(everything)(x, W)
        assert all(e.params["precision"] == (jax.lax.Precision.HIGHEST,) * 2
                   for e in closed.jaxpr.eqns if e.primitive.name == "dot_general")
        after = count_prims(jax.make_jaxpr(jaxemu.emulate(everything, scheme="fp16x3"))(x, W))
        out = jax.jit(jaxemu.emulate(everything, scheme="fp16x3"))(x, W)
        ex = jaxemu.explain(everything, x, W, scheme="fp16x3")
    assert after.get("dot_general", 0) == 0 and after["jaxemu_dot"] == before["dot_general"]
    assert_close_f64(out, f64_reference(everything, x, W), rel=2e-5)
    assert all("precision HIGHEST asks for FP32 accuracy, which fp16x3 gives" in d.reason for d in ex)


def test_schemes_below_fp32_keep_highest_dots_in_fp32(rng):
    """A HIGHEST dot asks for FP32 accuracy: bf16 does not give it, so under
    bf16 the dot stays FP32 (explain says why; emulate warns when that leaves
    nothing to emulate); unpinned dots in the same function are emulated."""
    x = rng.standard_normal((8, 8)).astype(np.float32)
    f = lambda x: (jnp.dot(x, x, precision="highest"), x @ x)  # noqa: E731
    ex = jaxemu.explain(f, x, scheme="bf16")
    assert ex[0].scheme is None and "FP32 accuracy, which bf16 does not give" in ex[0].reason
    assert ex[1].scheme.name == "bf16"
    hi, lo = jax.jit(jaxemu.emulate(f, scheme="bf16"))(x)
    ref = x.astype(np.float64) @ x.astype(np.float64)
    assert T.relerr(hi, ref) <= 2 * T.relerr(x @ x, ref) + 1e-7  # FP32's accuracy
    assert T.relerr(lo, ref) >= 100 * T.relerr(x @ x, ref)       # bf16's
    with jax.default_matmul_precision("highest"):
        with pytest.warns(jaxemu.NothingEmulatedWarning, match="FP32-class scheme"):
            jax.jit(jaxemu.emulate(lambda x: x @ x, scheme="bf16"))(x)
    # explicit requests win: emulate_pinned, or a per-dot choice
    assert jaxemu.explain(f, x, scheme="bf16", emulate_pinned=True)[0].scheme.name == "bf16"
    assert jaxemu.explain(f, x, per_dot={0: "bf16"})[0].scheme.name == "bf16"


def test_fp32_scheme_leaves_the_callers_dot_general():
    """A dot decided as fp32 stays the caller's dot_general (not jaxemu_dot):
    same operands and dimension numbers, precision raised to HIGHEST where
    unset/DEFAULT, kept where already HIGHEST; explain still says fp32."""
    a = np.ones((4, 3), np.float32)
    b = np.ones((4, 5), np.float32)
    dn = (((0,), (0,)), ((), ()))
    f = lambda a, b: (jax.lax.dot_general(a, b, dn),  # noqa: E731  (unset, a^T b: no transpose folded)
                      jax.lax.dot_general(a, b, dn, precision=jax.lax.Precision.DEFAULT),
                      jax.lax.dot_general(a, b, dn, precision=(jax.lax.Precision.HIGHEST, jax.lax.Precision.DEFAULT)))
    before = jax.make_jaxpr(f)(a, b).jaxpr.eqns
    jaxpr = jax.make_jaxpr(jaxemu.emulate(f, scheme="fp32"))(a, b).jaxpr
    after = jaxpr.eqns
    assert [e.primitive.name for e in after] == ["dot_general"] * 3
    highest = (jax.lax.Precision.HIGHEST,) * 2
    assert [e.params["precision"] for e in after] == [highest, highest, before[2].params["precision"]]
    for e, e0 in zip(after, before):
        assert e.invars == jaxpr.invars  # a, b as they are, in the caller's order
        assert {**e.params, "precision": None} == {**e0.params, "precision": None}
    ex = jaxemu.explain(f, a, b, scheme="fp32")
    assert all(d.scheme.name == "fp32" and "caller's dot_general" in d.reason for d in ex)
    np.testing.assert_array_equal(np.asarray(jax.jit(jaxemu.emulate(f, scheme="fp32"))(a, b)[0]), a.T @ b)


def test_dots_asking_for_less_stay_as_they_are(rng):
    x = rng.standard_normal((8, 8)).astype(np.float32)
    with jax.default_matmul_precision("tensorfloat32"):
        with pytest.warns(jaxemu.NothingEmulatedWarning, match="emulate_pinned=True"):
            c = count_prims(jax.make_jaxpr(jaxemu.emulate(lambda x: x @ x))(x))
    assert c.get("jaxemu_dot", 0) == 0 and c["dot_general"] == 1
    preset = lambda x: jax.lax.dot(x, x, precision=jax.lax.DotAlgorithmPreset.BF16_BF16_F32_X3)  # noqa: E731
    ex = jaxemu.explain(preset, x)
    assert ex[0].scheme is None and "algorithm BF16_BF16_F32_X3 pinned" in ex[0].reason


def test_nothing_emulated_warns_once(rng):
    em = jaxemu.emulate(lambda x: jnp.sin(x))
    with pytest.warns(jaxemu.NothingEmulatedWarning) as record:
        em(np.ones(3, np.float32))
        em(np.ones(4, np.float32))  # retraced: no second warning
    assert len([w for w in record if issubclass(w.category, jaxemu.NothingEmulatedWarning)]) == 1
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jaxemu.emulate(lambda x: x @ x)(np.ones((3, 3), np.float32))  # something emulated: silent


# ---------------------------------------------------------------------------
# Composition, caching, signatures, per-dot control, explain.

def test_jit_of_emulate_and_emulate_of_jit_agree(rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    f = lambda x, w: jnp.tanh(x @ w) @ w.T
    r1 = jax.jit(jaxemu.emulate(f))(x, W)
    r2 = jaxemu.emulate(jax.jit(f))(x, W)
    np.testing.assert_array_equal(np.asarray(r1), np.asarray(r2))


def test_vmap_composes(rng):
    xs = rng.standard_normal((5, 4, 8)).astype(np.float32)
    f = lambda x: jnp.sum((x @ W) ** 2)
    out = jax.vmap(jaxemu.emulate(f))(xs)
    assert out.shape == (5,)
    assert_close_f64(out, f64_reference(jax.vmap(f), xs), rel=5e-6)
    jaxpr = jax.make_jaxpr(jax.vmap(jaxemu.emulate(f)))(xs)
    assert count_prims(jaxpr).get("jaxemu_dot") == 1


def test_pytrees_kwargs_static_args_and_no_retrace(rng):
    traces = []

    def f(params, x, *, act="tanh"):
        traces.append(1)
        y = x @ params["w"]
        return {"y": getattr(jnp, act)(y), "n": jnp.sum(y)}

    em = jaxemu.emulate(f)
    p = {"w": W}
    x = rng.standard_normal((4, 8)).astype(np.float32)
    out = em(p, x, act="sin")
    assert set(out) == {"y", "n"}
    em(p, x + 1, act="sin")
    em(p, x * 2, act="sin")
    assert len(traces) == 1  # same shapes, same static args: traced once
    em(p, x, act="tanh")
    assert len(traces) == 2  # a new static argument retraces
    em(p, np.ones((2, 8), np.float32), act="tanh")
    assert len(traces) == 3  # a new shape retraces
    jf = jax.jit(jaxemu.emulate(lambda x, n: x @ W * n), static_argnums=1)
    np.testing.assert_allclose(np.asarray(jf(x, 3)), 3 * (x @ W), rtol=1e-5, atol=1e-5)


def test_per_dot_mapping_callable_and_explain(rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    f = lambda x: jnp.tanh(x @ W) @ W.T
    ex = jaxemu.explain(f, x)
    assert [d.info.index for d in ex] == [0, 1]
    assert all(d.scheme.name == "bf16x6" for d in ex)
    assert "bf16x6" in str(ex) and "float32[4, 8]" in str(ex)
    ex2 = jaxemu.explain(f, x, per_dot={0: "fp16x3", 1: None})
    assert ex2[0].scheme.name == "fp16x3" and ex2[1].scheme is None
    c = count_prims(jax.make_jaxpr(jaxemu.emulate(f, per_dot={1: None}))(x))
    assert c == {**c, "jaxemu_dot": 1, "dot_general": 1}
    pick = lambda info: "bf16" if info.lhs == (4, 8) and info.index == 0 else "bf16x9"
    ex3 = jaxemu.explain(f, x, per_dot=pick)
    assert [d.scheme.name for d in ex3] == ["bf16", "bf16x9"]


def test_default_scheme_context_applies_to_emulate(rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    em = jaxemu.emulate(lambda x: x @ W)
    with jaxemu.default_scheme("fp16x3"):
        j = str(jax.make_jaxpr(em)(x))
    assert "scheme=fp16x3" in j
    assert "scheme=bf16x6" in str(jax.make_jaxpr(em)(x))
    # jit's cache knows the default scheme: no stale trace.
    jf = jax.jit(lambda x: jaxemu.dot(x, W))
    with jaxemu.default_scheme("bf16"):
        lo = np.asarray(jf(x))
    hi = np.asarray(jf(x))
    assert not np.array_equal(lo, hi)


def test_explain_reports_skipped_dots():
    x = np.ones((3, 3), np.float32)
    f = lambda x: (jnp.dot(x, x, precision="high"), x.astype(jnp.bfloat16) @ x.astype(jnp.bfloat16))
    ex = jaxemu.explain(f, x)
    assert ex[0].scheme is None and "precision HIGH pinned by the caller" in ex[0].reason
    assert ex[1].scheme is None and "bfloat16" in ex[1].reason


@pytest.mark.parametrize("case", ["2d", "lhs", "batched", "both", "reordered"])
def test_transposes_fold_into_the_product_bit_for_bit(case, rng):
    # A transposed operand reaches jaxemu_dot as the array it was made from,
    # its axes renamed in the dimension numbers (so x @ y.T gives the backend
    # y with K minor: no transposed copy), where the output's axis order
    # allows; the product and its bits are the same as jaxemu.dot_general
    # on the transposed operands themselves.
    f = {
        "2d": (lambda x, y: x @ y.T, (16, 24), (40, 24)),
        "lhs": (lambda x, y: x.T @ y, (24, 16), (24, 40)),
        "batched": (lambda x, y: x @ jnp.swapaxes(y, 1, 2), (3, 16, 24), (3, 40, 24)),
        "both": (lambda x, y: jnp.swapaxes(x, 1, 2) @ jnp.swapaxes(y, 1, 2), (3, 24, 16), (3, 40, 24)),
        # the free axes of y.transpose(0, 2, 1) would leave in another order: not folded
        "reordered": (lambda x, y: jnp.einsum("mk,knp->mnp", x, jnp.transpose(y, (0, 2, 1))), (16, 24), (24, 6, 5)),
    }[case]
    fn, sx, sy = f
    x, y = (rng.standard_normal(s).astype(np.float32) for s in (sx, sy))
    jaxpr = jax.make_jaxpr(jaxemu.emulate(fn, scheme="fp16x3"))(x, y)
    dots = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "jaxemu_dot"]
    assert len(dots) == 1
    made_by_transpose = {e.outvars[0] for e in jaxpr.jaxpr.eqns if e.primitive.name == "transpose"}
    folded = not any(v in made_by_transpose for v in dots[0].invars)
    assert folded == (case != "reordered"), (case, dots[0].params["dimension_numbers"])
    got = np.asarray(jax.jit(jaxemu.emulate(fn, scheme="fp16x3"))(x, y))
    # the same product without the fold: jaxemu.dot_general on materialized transposes
    with jaxemu.default_scheme("fp16x3"):
        plain = {
            "2d": lambda: jaxemu.matmul(x, jnp.asarray(y.T)),
            "lhs": lambda: jaxemu.matmul(jnp.asarray(x.T), y),
            "batched": lambda: jaxemu.matmul(x, jnp.asarray(np.swapaxes(y, 1, 2))),
            "both": lambda: jaxemu.matmul(jnp.asarray(np.swapaxes(x, 1, 2)), jnp.asarray(np.swapaxes(y, 1, 2))),
            "reordered": lambda: jaxemu.dot_general(x, jnp.asarray(np.transpose(y, (0, 2, 1))),
                                                    (((1,), (0,)), ((), ()))),
        }[case]()
    np.testing.assert_array_equal(got, np.asarray(plain))
    ref = f64_reference(fn, x, y)
    assert np.max(np.abs(got - ref)) <= 1e-5 * np.max(np.abs(ref))
