"""Randomized cases through the public API (issue 12): every scheme, random
shapes and dimension numbers, ten input laws (special values included),
jit / vmap / jvp / grad / emulate through scan, while and cond; bad input.

The cases come from tests/randomized.py, seeded by JAXEMU_TEST_SEED or
--seed (printed in the pytest header and summary). Cases that share a
compiled function run as one vmapped call, so the suite stays fast.
"""
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxemu
import randomized as R

SEED = R.seed_from_env()
GROUPS = R.generate(SEED)
TALLY = R.Tally()
HIGHEST = lax.Precision.HIGHEST
# A compile option at XLA's default value: it changes the persistent
# compilation cache's key (conftest.py keeps that cache), so the "fresh
# compilation" of a rerun is a real one, not the cached executable.
FRESH = {"xla_cpu_enable_fast_math": False}


def by(pred):
    return [g for g in GROUPS if pred(g)]


def _api(g):
    s = g.scheme
    if g.api == "dot":
        return lambda x, y: jaxemu.dot(x, y, scheme=s)
    if g.api == "matmul":
        return lambda x, y: jaxemu.matmul(x, y, scheme=s)
    return lambda x, y: jaxemu.dot_general(x, y, g.dn, scheme=s)


def _checked_operands(g, a, b):
    """The operands and dimension numbers that the float64 check uses: for
    matmul, its broadcast operands and batch dimension numbers."""
    if g.api != "matmul":
        return a, b, g.dn
    batch = np.broadcast_shapes(a.shape[1:-2], b.shape[1:-2])
    v = a.shape[0]
    pad = lambda x: x.reshape((v,) + (1,) * (len(batch) + 3 - x.ndim) + x.shape[1:])
    a, b = pad(a), pad(b)
    a = np.broadcast_to(a, (v,) + batch + a.shape[-2:])
    b = np.broadcast_to(b, (v,) + batch + b.shape[-2:])
    nd = a.ndim - 1
    return a, b, (((nd - 1,), (nd - 2,)), (tuple(range(nd - 2)), tuple(range(nd - 2))))


@functools.lru_cache(maxsize=None)
def _fp32_fn(lhs_shape, rhs_shape, dn):
    # FP32's own product, compiled once per shape signature (shared by schemes).
    return jax.jit(jax.vmap(lambda x, y: lax.dot_general(x, y, dn, precision=HIGHEST)))


def fp32(a, b, dn):
    return _fp32_fn(a.shape[1:], b.shape[1:], dn)(a, b)


def run_vmap(g):
    a, b = R.make_operands(g, SEED)
    ax = g.vmap_axis
    f = jax.jit(jax.vmap(_api(g), in_axes=(ax, ax)))
    a_in, b_in = np.moveaxis(a, 0, ax), np.moveaxis(b, 0, ax)
    out = f(a_in, b_in)
    ca, cb, dn = _checked_operands(g, a, b)
    expect = jax.eval_shape(lambda x, y: lax.dot_general(x, y, R.stacked_dn(dn)), ca, cb)
    assert out.shape == expect.shape and out.dtype == expect.dtype, g.describe()
    R.check_cases(g, ca, cb, out, fp32(np.ascontiguousarray(ca), np.ascontiguousarray(cb), dn), TALLY, SEED, dn)
    if g.rerun:
        # Bit-identical: the same compiled function again, and a fresh compilation.
        again = f(a_in, b_in)
        fresh_fn = jax.jit(jax.vmap(_api(g), in_axes=(ax, ax)))
        fresh = fresh_fn.lower(a_in, b_in).compile(FRESH)(a_in, b_in)
        np.testing.assert_array_equal(np.asarray(out).view(np.uint32), np.asarray(again).view(np.uint32))
        np.testing.assert_array_equal(np.asarray(out).view(np.uint32), np.asarray(fresh).view(np.uint32))
        TALLY.reruns += len(g.laws)


def run_jit(g):
    a, b = R.make_operands(g, SEED)
    f = jax.jit(_api(g))
    out = np.stack([np.asarray(f(x, y)) for x, y in zip(a, b)])
    assert out.shape == (len(g.laws),) + jax.eval_shape(lambda x, y: lax.dot_general(x, y, g.dn), a[0], b[0]).shape
    R.check_cases(g, a, b, out, fp32(a, b, g.dn), TALLY, SEED)


def _concat_contracting(g, x1, x2, y1, y2):
    """[x1, x2] . [y1; y2] along the first contracting pair = x1.y1 + x2.y2."""
    (lc, rc), _ = g.dn
    return np.concatenate([x1, x2], axis=1 + lc[0]), np.concatenate([y1, y2], axis=1 + rc[0])


def run_jvp(g):
    a, b = R.make_operands(g, SEED)
    rng = np.random.default_rng([SEED, g.gid, 1])
    da = rng.uniform(-1, 1, a.shape).astype(np.float32)
    db = rng.uniform(-1, 1, b.shape).astype(np.float32)
    f = _api(g)
    jf = jax.jit(jax.vmap(lambda x, y, dx, dy: jax.jvp(f, (x, y), (dx, dy))))
    primal, tangent = jf(a, b, da, db)
    R.check_cases(g, a, b, primal, fp32(a, b, g.dn), TALLY, SEED)
    # The tangent da.b + a.db is one product over a doubled contracting axis
    # (two emulated products and one FP32 addition: within that product's bound).
    ta, tb = _concat_contracting(g, da, a, b, db)
    R.check_cases(g, ta, tb, tangent, None, None, SEED)


def run_grad(g):
    a, b = R.make_operands(g, SEED)
    rng = np.random.default_rng([SEED, g.gid, 2])
    f = _api(g)
    ct = rng.uniform(-1, 1, (len(g.laws),) + jax.eval_shape(f, a[0], b[0]).shape).astype(np.float32)
    loss = lambda x, y, w: jnp.sum(f(x, y) * w)
    ga, gb = jax.jit(jax.vmap(jax.grad(loss, (0, 1))))(a, b, ct)
    assert ga.shape == a.shape and gb.shape == b.shape
    # Expected gradients from the canonical forms: gA = W B^T, gB = A^T W,
    # mapped back to the operands' layouts.
    ca, cb = R.canonical(a.astype(np.float64), b.astype(np.float64), g.dn)
    w = ct.astype(np.float64).reshape(ca.shape[:3] + (cb.shape[-1],))
    (lc, rc), (lb, rb) = g.dn
    lf = [d for d in range(a.ndim - 1) if d not in lc and d not in lb]
    rf = [d for d in range(b.ndim - 1) if d not in rc and d not in rb]
    for got, x, y, perm, shape in (
            (ga, w, np.swapaxes(cb, -1, -2), (*lb, *lf, *lc), a.shape),
            (gb, np.swapaxes(ca, -1, -2), w, (*rb, *rc, *rf), b.shape)):
        got = np.asarray(got, np.float64)
        want = x @ y
        # got in the operand's layout -> canonical (V, B, rows, cols) of want.
        got_c = got.transpose([0] + [1 + d for d in perm]).reshape(want.shape)
        if got is gb or got.shape == b.shape and perm == (*rb, *rc, *rf):
            pass
        bound, _ = R.componentwise_bound(g.scheme, x, y)
        err = np.abs(got_c - want)
        assert np.all(np.isfinite(got_c)), g.describe()
        assert np.all(err <= bound), (f"[seed {SEED}] {g.describe()}: gradient error {err.max():.3g} above "
                                      f"the bound (max {bound.max():.3g})")
    TALLY.cases += len(g.laws)


def _body_dot(g):
    # A plain JAX dot that emulate rewrites.
    return lambda x, y: lax.dot_general(x, y, g.dn)


def run_control_flow(g):
    a, b = R.make_operands(g, SEED)
    d = _body_dot(g)
    v = len(g.laws)
    if g.transform == "scan":
        def f(A, B):
            return lax.scan(lambda c, xy: (c, d(*xy)), 0.0, (A, B))[1]
    elif g.transform == "while":
        def f(A, B):
            out0 = jnp.zeros((v,) + jax.eval_shape(d, A[0], B[0]).shape, jnp.float32)

            def body(c):
                i, out = c
                return i + 1, lax.dynamic_update_index_in_dim(out, d(A[i], B[i]), i, 0)
            return lax.while_loop(lambda c: c[0] < v, body, (0, out0))[1]
    else:  # cond: both branches emulated; -(-a . b) is the same product
        def f(A, B):
            def step(c, ixy):
                i, x, y = ixy
                return c, lax.cond(i % 2 == 0, lambda: d(x, y), lambda: -d(-x, y))
            return lax.scan(step, 0.0, (jnp.arange(v), A, B))[1]
    em = jaxemu.emulate(f, scheme=g.scheme)
    jaxpr = str(jax.make_jaxpr(em)(a, b))
    if jaxemu.get_scheme(g.scheme).family == "native":
        # fp32: the dots stay dot_general, at precision HIGHEST (emulate._fp32_dot)
        assert "jaxemu_dot" not in jaxpr and "Precision.HIGHEST" in jaxpr, g.describe()
    else:
        # The dots really are rewritten (else FP32 itself would pass the bounds).
        assert "jaxemu_dot" in jaxpr, g.describe()
    out = jax.jit(em)(a, b)
    R.check_cases(g, a, b, out, fp32(a, b, g.dn), TALLY, SEED)


RUNNERS = {"vmap": run_vmap, "jit": run_jit, "jvp": run_jvp, "grad": run_grad,
           "scan": run_control_flow, "while": run_control_flow, "cond": run_control_flow}


# Schemes with a known failure of the randomized checks (strict: a fix makes
# the xfail an error, so the entry must go).
KNOWN = {}


@pytest.mark.parametrize("scheme", [pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN[n], strict=True))
                                    if n in KNOWN else n for n in R.float32_schemes()])
def test_random_cases(scheme):
    groups = by(lambda g: g.scheme == scheme and g.api != "emulate")
    assert groups
    for g in groups:
        RUNNERS[g.transform](g)


def test_random_emulate_control_flow():
    groups = by(lambda g: g.api == "emulate" and g.scheme not in KNOWN)
    assert groups
    for g in groups:
        run_control_flow(g)


def test_random_bad_input():
    cases = R.bad_inputs(SEED)
    for desc, api, a, b, dn, scheme, exc, msg in cases:
        call = {"dot": lambda: jaxemu.dot(a, b, scheme=scheme),
                "matmul": lambda: jaxemu.matmul(a, b, scheme=scheme),
                "dot_general": lambda: jaxemu.dot_general(a, b, dn, scheme=scheme)}[api]
        try:
            call()
        except exc as e:
            assert re.search(msg, str(e)), f"[seed {SEED}] {desc}: message {str(e)!r} does not match {msg!r}"
        else:
            pytest.fail(f"[seed {SEED}] {desc}: no {exc.__name__} raised")
    TALLY.cases += len(cases)
    TALLY.bad_inputs += len(cases)
