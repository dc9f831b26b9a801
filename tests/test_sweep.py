"""emulate over JAX's own library code: public jax.numpy.linalg,
jax.scipy.linalg, jax.scipy.sparse.linalg and jax.scipy.optimize functions,
their gradients, and optax optimizers in lax.scan training loops. Every
control-flow and custom-rule primitive they use (jit, cond, while, scan,
custom_jvp, custom_vjp, custom_linear_solve, custom_root, checkpoint, ...)
is met on the way.

For each function: (a) jit(emulate(f)) traces and runs; (b) every eligible
dot (float32, precision unset, DEFAULT or HIGHEST) is rewritten, as many
jaxemu_dot as there were eligible dot_general, none left; (c) the result is
within 4x FP32's error against float64 (plus 2^-20: FP32's own error is
luck on problems this small); and with scheme fp32 emulate changes nothing
(bitwise the same as f).
"""
import warnings

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import jax.scipy.optimize  # noqa: F401  (a lazily loaded submodule)
import jax.scipy.sparse.linalg as jssl
import numpy as np
import pytest

import jaxemu
from jaxemu import _compat
from jaxemu.emulate import precision_request

N = 8
_rng = np.random.default_rng(20261122)
_q, _ = np.linalg.qr(_rng.standard_normal((N, N)))
SPD = (_q @ np.diag(np.linspace(1, 4, N)) @ _q.T).astype(np.float32)        # condition 4
GEN = (3 * np.eye(N) + _rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32)
TALL = _rng.standard_normal((12, N)).astype(np.float32)
VEC = _rng.standard_normal(N).astype(np.float32)
RHS = _rng.standard_normal((N, 3)).astype(np.float32)
SMALL = (GEN / 4).astype(np.float32)
LOWER = np.tril(GEN).astype(np.float32)


def _custom_root(a, b):
    """Solve a x = b as a root of f(x) = a x - b (Newton from 0: one solve),
    with implicit differentiation (lax.custom_root)."""
    f = lambda x: a @ x - b  # noqa: E731
    newton = lambda f, x0: x0 - jnp.linalg.solve(jax.jacobian(f)(x0), f(x0))  # noqa: E731
    tangent = lambda g, y: jnp.linalg.solve(jax.jacobian(g)(y), y)  # noqa: E731
    return jax.lax.custom_root(f, jnp.zeros_like(b), newton, tangent)


@jax.custom_batching.custom_vmap
def _vmapped_matvec(a, x):
    return a @ x


@_vmapped_matvec.def_vmap
def _vmapped_matvec_rule(axis_size, in_batched, a, x):
    a_batched, x_batched = in_batched
    a = a if a_batched else jnp.broadcast_to(a, (axis_size,) + a.shape)
    x = x if x_batched else jnp.broadcast_to(x, (axis_size,) + x.shape)
    return jnp.einsum("bij,bj->bi", a, x), True


# name -> (f, args): jnp.linalg, jax.scipy.linalg, jax.scipy.sparse.linalg, jax.scipy.optimize
LINALG = {
    "jnp.linalg.solve": (jnp.linalg.solve, (GEN, VEC)),
    "jnp.linalg.solve (matrix rhs)": (jnp.linalg.solve, (GEN, RHS)),
    "jnp.linalg.inv": (jnp.linalg.inv, (GEN,)),
    "jnp.linalg.det": (jnp.linalg.det, (GEN,)),
    "jnp.linalg.slogdet": (lambda a: jnp.linalg.slogdet(a)[1], (GEN,)),
    "jnp.linalg.lstsq": (lambda a, b: jnp.linalg.lstsq(a, b)[0], (TALL, TALL[:, 0] + 1)),
    "jnp.linalg.pinv": (jnp.linalg.pinv, (TALL,)),
    "jnp.linalg.matrix_power": (lambda a: jnp.linalg.matrix_power(a, 5), (SMALL,)),
    "jnp.linalg.multi_dot": (lambda a, b, c: jnp.linalg.multi_dot([a, b, c]), (GEN, SPD, RHS)),
    "jnp.linalg.tensorsolve": (jnp.linalg.tensorsolve, (GEN, VEC)),
    "jnp.linalg.tensorinv": (lambda a: jnp.linalg.tensorinv(a, ind=1), (GEN,)),
    "jnp.linalg.vecdot": (lambda a, b: jnp.linalg.vecdot(a, b), (GEN, RHS[:, 0])),
    "jnp.linalg.matmul": (jnp.linalg.matmul, (GEN, RHS)),
    "jnp.linalg.tensordot": (lambda a, b: jnp.linalg.tensordot(a, b, axes=1), (GEN, RHS)),
    "jnp.linalg.cholesky": (jnp.linalg.cholesky, (SPD,)),
    "jnp.linalg.eigh": (lambda a: jnp.linalg.eigh(a)[0], (SPD,)),
    "jnp.linalg.svdvals": (jnp.linalg.svdvals, (GEN,)),
    "jnp.linalg.cond": (jnp.linalg.cond, (GEN,)),
    "jsl.solve": (jsl.solve, (GEN, RHS)),
    "jsl.solve (assume_a=pos)": (lambda a, b: jsl.solve(a, b, assume_a="pos"), (SPD, RHS)),
    "jsl.lu_factor + lu_solve": (lambda a, b: jsl.lu_solve(jsl.lu_factor(a), b), (GEN, RHS)),
    "jsl.cho_factor + cho_solve": (lambda a, b: jsl.cho_solve(jsl.cho_factor(a), b), (SPD, RHS)),
    "jsl.solve_triangular": (lambda a, b: jsl.solve_triangular(a, b, lower=True), (LOWER, RHS)),
    "jsl.inv": (jsl.inv, (GEN,)),
    "jsl.det": (jsl.det, (GEN,)),
    "jsl.expm": (jsl.expm, (SMALL,)),
    "jsl.expm_frechet": (lambda a, e: jsl.expm_frechet(a, e)[1], (SMALL, SPD / 4)),
    "jsl.polar": (lambda a: jsl.polar(a)[0], (GEN,)),
    "jsl.solve_sylvester": (lambda a, b, c: jsl.solve_sylvester(a, b, c), (SPD, SPD + 1, GEN)),
    "jssl.cg": (lambda a, b: jssl.cg(a, b, tol=1e-7)[0], (SPD, VEC)),
    "jssl.cg (operator)": (lambda a, b: jssl.cg(lambda v: a @ v, b, tol=1e-7)[0], (SPD, VEC)),
    "jssl.gmres": (lambda a, b: jssl.gmres(a, b, tol=1e-7)[0], (GEN, VEC)),
    "jssl.gmres (batched)": (lambda a, b: jssl.gmres(a, b, tol=1e-7, solve_method="batched")[0], (GEN, VEC)),
    "jssl.bicgstab": (lambda a, b: jssl.bicgstab(a, b, tol=1e-7)[0], (GEN, VEC)),
    "jax.scipy.optimize.minimize (BFGS)": (
        lambda a, b: jax.scipy.optimize.minimize(lambda x: jnp.sum((a @ x - b) ** 2), jnp.zeros_like(b),
                                                 method="BFGS").x, (SPD, VEC)),
    "lax.custom_root": (_custom_root, (SPD, VEC)),
    "custom_vmap under vmap": (jax.vmap(_vmapped_matvec, in_axes=(None, 1), out_axes=1), (GEN, RHS)),
}

# Reverse-mode through the custom rules (custom_linear_solve's transpose
# solve, custom_jvp rules, custom_root's implicit derivative, while loops).
GRADS = {
    "grad jnp.linalg.solve": (lambda a, b: jnp.sum(jnp.linalg.solve(a, b) ** 2), (GEN, VEC)),
    "grad jnp.linalg.det": (jnp.linalg.det, (GEN,)),
    "grad jnp.linalg.lstsq": (lambda a, b: jnp.sum(jnp.linalg.lstsq(a, b)[0] ** 2), (TALL, TALL[:, 0] + 1)),
    "grad jnp.linalg.pinv": (lambda a: jnp.sum(jnp.linalg.pinv(a) ** 2), (TALL,)),
    "grad jnp.linalg.eigh": (lambda a: jnp.sum(jnp.linalg.eigh(a)[0] ** 3), (SPD,)),
    "grad jsl.expm": (lambda a: jnp.sum(jsl.expm(a) ** 2), (SMALL,)),
    "grad jssl.cg": (lambda a, b: jnp.sum(jssl.cg(a, b, tol=1e-7)[0] ** 2), (SPD, VEC)),
    "grad lax.custom_root": (lambda a, b: jnp.sum(_custom_root(a, b) ** 2), (SPD, VEC)),
}


def _loop(make_opt, steps=6):
    """Fit w in ||X w - y||^2 + a small MLP's loss with optimizer ``make_opt()``,
    ``steps`` updates in lax.scan."""
    def train(x, y, w0):
        opt = optax.with_extra_args_support(make_opt())

        def loss(w):
            h = jnp.tanh(x @ w["a"])
            return jnp.mean((h @ w["b"] - y) ** 2)

        def step(carry, _):
            w, state = carry
            l, g = jax.value_and_grad(loss)(w)
            upd, state = opt.update(g, state, w, value=l, grad=g, value_fn=loss)
            return (optax.apply_updates(w, upd), state), l
        (w, _), losses = jax.lax.scan(step, (w0, opt.init(w0)), None, length=steps)
        return w, losses
    return train


optax = pytest.importorskip("optax")


OPTIMIZERS = {
    "optax.sgd (momentum)": lambda: optax.sgd(0.05, momentum=0.9),
    "optax.adam": lambda: optax.adam(0.05),
    "optax.adamw": lambda: optax.adamw(0.05),
    "optax.lamb": lambda: optax.lamb(0.05),
    "optax.lion": lambda: optax.lion(0.01),
    "optax.rmsprop": lambda: optax.rmsprop(0.01),
    "optax.adafactor": lambda: optax.adafactor(0.05),
    "optax.lbfgs": lambda: optax.lbfgs(learning_rate=0.1, linesearch=None),
    "optax.contrib.muon": lambda: optax.contrib.muon(0.02),
}

X = _rng.standard_normal((16, N)).astype(np.float32)
Y = _rng.standard_normal((16, 2)).astype(np.float32)
W0 = {"a": (_rng.standard_normal((N, N)) / 3).astype(np.float32), "b": (_rng.standard_normal((N, 2)) / 3).astype(np.float32)}

CASES = {**LINALG, **{k: (jax.grad(f, argnums=tuple(range(len(a)))), a) for k, (f, a) in GRADS.items()},
         **{k: (_loop(m), (X, Y, W0)) for k, m in OPTIMIZERS.items()}}


# ---------------------------------------------------------------------------

def eligible(eqn) -> bool:
    """A dot_general that an FP32-class scheme must emulate."""
    avals = [v.aval for v in eqn.invars]
    return (all(a.dtype == np.float32 for a in avals) and eqn.outvars[0].aval.dtype == np.float32
            and precision_request(eqn.params.get("precision"))[0] in ("default", "fp32"))


def count(closed):
    """(eligible dot_general, other dot_general, jaxemu_dot) over a jaxpr and its sub-jaxprs."""
    n = [0, 0, 0]

    def walk(j):
        for e in j.eqns:
            if e.primitive.name == "dot_general":
                n[0 if eligible(e) else 1] += 1
            elif e.primitive.name == "jaxemu_dot":
                n[2] += 1
            for v in e.params.values():
                for x in (v if isinstance(v, (tuple, list)) else [v]):
                    if isinstance(x, _compat.ClosedJaxpr):
                        walk(x.jaxpr)
                    elif isinstance(x, _compat.Jaxpr):
                        walk(x)
    walk(closed.jaxpr)
    return tuple(n)


def f64(f, args):
    with jax.enable_x64(True):
        out = f(*jax.tree_util.tree_map(lambda x: jnp.asarray(np.asarray(x, np.float64)), args))
        return [np.asarray(x, np.float64) for x in jax.tree_util.tree_leaves(out)]


def relerr(out, ref):
    out = [np.asarray(x, np.float64) for x in jax.tree_util.tree_leaves(out)]
    num = np.sqrt(sum(np.sum((o - r) ** 2) for o, r in zip(out, ref)))
    return num / np.sqrt(sum(np.sum(r ** 2) for r in ref))


def quiet(fn, *args):
    """fn(*args), without emulate's NothingEmulatedWarning (asserted elsewhere)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxemu.NothingEmulatedWarning)
        return fn(*args)


@pytest.mark.parametrize("name", list(CASES))
def test_emulate_over_jax_library_code(name):
    f, args = CASES[name]
    em = jaxemu.emulate(f, scheme="bf16x6")
    before = count(jax.make_jaxpr(f)(*args))
    after = quiet(lambda: count(jax.make_jaxpr(em)(*args)))
    # (b) every eligible dot emulated, nothing else touched
    assert after == (0, before[1], before[0] + before[2]), (before, after)
    # (a) runs under jit, (c) within FP32's accuracy
    out = quiet(jax.jit(em), *args)
    ref = f64(f, args)
    e32 = relerr(jax.jit(f)(*args), ref)
    assert relerr(out, ref) <= 4 * e32 + 2.0**-20, (relerr(out, ref), e32)
    # With scheme fp32 emulate changes nothing, bit for bit: it leaves each
    # fp32 dot as the caller's dot_general (precision HIGHEST, FP32 on the
    # CPU anyway), so XLA compiles f's own program (emulate._fp32_dot).
    same = quiet(jax.jit(jaxemu.emulate(f, scheme="fp32")), *args)
    for a, b in zip(jax.tree_util.tree_leaves(jax.jit(f)(*args)), jax.tree_util.tree_leaves(same)):
        assert np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True), name


def test_the_sweep_covers_the_library():
    counts = {}
    for name, (f, args) in CASES.items():
        counts[name] = count(jax.make_jaxpr(f)(*args))[0]
    with_dots = [n for n, c in counts.items() if c]
    print(f"\nemulate sweep: {len(CASES)} functions ({len(LINALG)} linalg/solvers/optimize, {len(GRADS)} gradients, "
          f"{len(OPTIMIZERS)} optax optimizers), {len(with_dots)} with eligible dots, "
          f"{sum(counts.values())} eligible dots in all")
    assert len(CASES) >= 50 and len(with_dots) >= 40


def test_functions_without_eligible_dots_warn():
    for name in ("jnp.linalg.cholesky", "jnp.linalg.eigh"):
        f, args = CASES[name]
        with pytest.warns(jaxemu.NothingEmulatedWarning):
            jaxemu.emulate(f)(*args)


@pytest.mark.parametrize("name", ["lax.custom_root", "grad lax.custom_root"])
def test_sub_programs_outside_the_jaxpr_are_emulated(name):
    """lax.custom_root keeps its functions outside the jaxpr on jax 0.11 (a
    hijax primitive): their dots are emulated too, which bf16's error shows
    (FP32's here is ~1e-7)."""
    f, args = CASES[name]
    ref = f64(f, args)
    e = relerr(jax.jit(jaxemu.emulate(f, scheme="bf16"))(*args), ref)
    assert 100 * relerr(jax.jit(f)(*args), ref) <= e <= 20 * jaxemu.get_scheme("bf16").error_bound()


def test_custom_vmap_rule_is_emulated_under_an_outer_vmap():
    """vmap outside emulate: JAX calls custom_vmap's rule on the rewritten
    program, and the rule's dots are emulated too."""
    plain = jax.vmap(_vmapped_matvec, in_axes=(None, 1), out_axes=1)
    em = jax.vmap(jaxemu.emulate(_vmapped_matvec, scheme="bf16"), in_axes=(None, 1), out_axes=1)
    ref = f64(plain, (GEN, RHS))
    e = relerr(jax.jit(em)(GEN, RHS), ref)
    assert 100 * relerr(jax.jit(plain)(GEN, RHS), ref) <= e <= 20 * jaxemu.get_scheme("bf16").error_bound()
    assert count(jax.make_jaxpr(jax.vmap(jaxemu.emulate(_vmapped_matvec), in_axes=(None, 1)))(GEN, RHS))[:2] == (0, 0)
