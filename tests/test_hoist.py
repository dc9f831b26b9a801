"""Loop-invariant operands split once, before the loop (jaxemu/hoist.py):
where emulate binds the split, that the product reads what it would have
made itself, and that the program computes the same under jit, grad, vmap.
(On the GPU, tests/test_cuda.py checks the kernel's bits and that XLA runs
the split once, outside the loop.)"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxemu
from jaxemu import _compat, hoist
from jaxemu.backends import cuda_fused, switches
from jaxemu.schemes import get_scheme


def eqns(closed):
    """(path, equation) over a jaxpr and its sub-jaxprs; path "" at the top."""
    out = []

    def walk(j, path):
        for e in j.eqns:
            out.append((path, e))
            for v in e.params.values():
                for x in (v if isinstance(v, (tuple, list)) else [v]):
                    if isinstance(x, _compat.ClosedJaxpr):
                        walk(x.jaxpr, path + "/" + e.primitive.name)
                    elif isinstance(x, _compat.Jaxpr):
                        walk(x, path + "/" + e.primitive.name)
    walk(closed.jaxpr, "")
    return out


def search(q, db):
    """kNN's shape of loop: chunks of queries under lax.map, the database a
    const of the scan, x @ y.T."""
    return jax.lax.map(lambda qc: jnp.max(2.0 * (qc @ db.T) - jnp.sum(db * db, axis=1), axis=1),
                       q.reshape(4, -1, q.shape[1]))


def lloyd_like(x, c):
    """k-means' shape of loop: fori_loop over iterations, the points a const,
    the centres the carry (x as the lhs)."""
    def step(i, c):
        d = x @ c.T
        w = jax.nn.softmax(-d, axis=1)
        return (w.T @ x) / (jnp.sum(w, axis=0)[:, None] + 1.0)
    return jax.lax.fori_loop(0, 3, step, c)


STATS = switches.variable("hoist_stats")


@pytest.fixture
def slice_path(monkeypatch):
    """fp16x3 on its slice path at this file's small shapes, which by default
    take the FP32-operand kernel (cuda_fused.f32_fp16_pays): it splits in
    shared memory and reads no split made ahead."""
    monkeypatch.setenv(switches.variable("f32_operands"), "0")


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    return (jnp.asarray(rng.standard_normal((256, 96)), jnp.float32),
            jnp.asarray(rng.standard_normal((2048, 96)), jnp.float32))


def splits_and_dots(f, *args, scheme="fp16x3", **kw):
    jx = jax.make_jaxpr(jaxemu.emulate(f, scheme=scheme, **kw))(*args)
    es = eqns(jx)
    return ([(p, e) for p, e in es if e.primitive.name == "jaxemu_split"],
            [(p, e) for p, e in es if e.primitive.name == "jaxemu_dot"])


@pytest.mark.parametrize("scheme", ["fp16x3", "tf32x3", "fp16x3_bitcut", "bf16x6", "bf16x3"])
def test_the_invariant_operand_is_split_before_the_loop(data, scheme):
    q, db = data
    splits, dots = splits_and_dots(search, q, db, scheme=scheme)
    if scheme in ("bf16x6", "bf16x3", "fp16x3"):
        # 64 x 2048 per chunk: the FP32-operand kernel, which splits in
        # shared memory and reads no slices (cuda_fused.f32_kernel; not
        # tf32x3 at K = 96: at K <= SHORT_K_HALF_KC its slice kernel
        # promotes every half K-tile, cuda_fused.kernel_kc)
        assert splits == [] and [e.params["presplit"] for _, e in dots] == [""]
        # a chunk of 1024 x 65536 takes the slice path (only traced here)
        q = jax.ShapeDtypeStruct((4096, 96), jnp.float32)
        db = jax.ShapeDtypeStruct((65536, 96), jnp.float32)
        splits, dots = splits_and_dots(search, q, db, scheme=scheme)
    assert [(p, e.params["side"]) for p, e in splits] == [("", "rhs")]
    assert [(p, e.params["presplit"], len(e.invars)) for p, e in dots] == [("/scan", "rhs", 5)]
    # the split reads the database itself (the scan's const), as the product would
    assert splits[0][1].invars[0].aval.shape == db.shape


def test_auto_gets_fp16x3s_split_and_its_statistics_of_b(data, monkeypatch):
    """auto's first choice is fp16x3, whose branch reads the split made
    ahead; its other branches split for themselves. Its column statistics of
    the invariant B come with the split (3 + 4 arrays after the operands),
    unless JAXEMU_CUDA_HOIST_STATS=0 (backends/switches.py). (Chunks of 1024
    x 8192: fp16x3's slice path; smaller outputs take the FP32-operand
    kernel, cuda_fused.f32_fp16_pays, which reads no split.)"""
    q = jax.ShapeDtypeStruct((4096, 96), jnp.float32)
    db = jax.ShapeDtypeStruct((8192, 96), jnp.float32)
    monkeypatch.setenv(STATS, "0")
    splits, dots = splits_and_dots(search, q, db, scheme="auto")
    assert [e.params["stats"] for _, e in splits] == [None] and [len(e.invars) for _, e in dots] == [5]
    monkeypatch.delenv(STATS)
    splits, dots = splits_and_dots(search, q, db, scheme="auto")
    assert [(p, e.params["side"], e.params["scheme"].name, e.params["stats"].name)
            for p, e in splits] == [("", "rhs", "fp16x3", "auto")]
    assert [(p, e.params["presplit"], e.params["scheme"].name, len(e.invars))
            for p, e in dots] == [("/scan", "rhs", "auto", 9)]
    assert [tuple(v.aval.shape) for v in splits[0][1].outvars[3:]] == [(1, 8192)] * 4  # (B, N)


def test_auto_takes_the_statistics_of_an_invariant_b_beside_an_exact_a(data, monkeypatch, slice_path):
    """The k-means update's shape (one-hot^T X, X the scan's const): no
    split ahead (an exact operand), but auto's statistics of X are; the
    points as A (x @ c.T) get their split and no statistics (auto's pass
    over A also takes the probe A v, with v from the centres)."""
    x, _ = data
    c = x[:64]

    def lloyd_onehot(x, c):
        def step(i, c):
            lab = jnp.argmin(-2.0 * (x @ c.T) + jnp.sum(c * c, axis=1), axis=1)
            onehot = jax.nn.one_hot(lab, c.shape[0])
            return (onehot.T @ x) / (jnp.sum(onehot, axis=0)[:, None] + 1.0)
        return jax.lax.fori_loop(0, 3, step, c)
    splits, dots = splits_and_dots(lloyd_onehot, x, c, scheme="auto")
    got = sorted((e.params["side"], getattr(e.params["scheme"], "name", None), getattr(e.params["stats"], "name", None))
                 for _, e in splits)
    assert got == [("lhs", "fp16x3", None), ("rhs", None, "auto")]
    assert sorted((e.params["presplit"], len(e.invars), e.params["exact"]) for _, e in dots) == \
        [("lhs", 5, (False, False)), ("rhs", 6, (True, False))]
    # the same bits with and without (on the CPU no test reads them: XLA's
    # reductions run in the loop, and XLA deletes the statistics made ahead)
    _same(*_both(lloyd_onehot, x, c, scheme="auto"), what="update, auto")


def test_statistics_made_ahead_give_auto_the_same_test(data):
    """auto's data test with B's column statistics given (as hoisted) is
    the test it takes itself: every quantity bit for bit."""
    from jaxemu import auto
    q, db = data
    a, b = q[None], db.T[None]
    s = get_scheme("auto")
    for ranges_only in (False, True):
        own = auto.DataTest.of(a, b, s, ranges_only=ranges_only)
        given = auto.DataTest.of(a, b, s, ranges_only=ranges_only, b_stats=auto.column_stats(b))
        for x, y in zip(own.st, given.st):
            assert (x is None) == (y is None)
            if x is not None:
                np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        assert bool(own.bf16x6_ok) == bool(given.bf16x6_ok)
        if not ranges_only:
            np.testing.assert_array_equal(np.asarray(own.normwise_ratio), np.asarray(given.normwise_ratio))


def test_the_points_of_a_fori_loop_are_split_before_it(data, slice_path):
    x, _ = data
    c = x[:64]
    splits, dots = splits_and_dots(lloyd_like, x, c)
    # x @ c.T splits x as A; w.T @ x splits it as B (its columns): two layouts
    assert [(p, e.params["side"]) for p, e in splits] == [("", "lhs"), ("", "rhs")]
    assert sorted((p, e.params["presplit"]) for p, e in dots) == [("/scan", "lhs"), ("/scan", "rhs")]


def test_switch_off_and_cases_that_are_not_split(data, monkeypatch):
    q, db = data
    monkeypatch.setenv(hoist.SWITCH, "0")
    assert splits_and_dots(search, q, db)[0] == []
    monkeypatch.delenv(hoist.SWITCH)
    for scheme in ("fp32", "bf16", "int8_l2", "ozaki2_f32"):  # one slice, int8: no slice path to feed
        assert splits_and_dots(search, q, db, scheme=scheme)[0] == [], scheme
    assert splits_and_dots(search, q, db, backend="xla")[0] == []  # the xla backend splits for itself
    # both operands change in every iteration: nothing to hoist
    assert splits_and_dots(lambda q, db: jax.lax.map(lambda qc: qc @ qc.T, q.reshape(4, -1, 96)), q, db)[0] == []
    # an exact operand (a one-hot) takes the one-slice variant: not split ahead
    onehot = lambda lab, x: jax.lax.map(lambda l: jax.nn.one_hot(l, 64).T @ x, lab.reshape(4, -1))
    assert splits_and_dots(onehot, jnp.arange(256) % 64, db[:64])[0] == []


@pytest.mark.parametrize("scheme", ["fp16x3", "bf16x6"])
def test_the_product_reads_what_it_would_have_split(data, scheme, monkeypatch):
    """presplit_operand gives split_operands' own arrays, for A and for B
    (as the rows of B^T where x @ y.T makes that free), XLA's split standing
    in for the split kernel on the CPU (the same bits: test_fused_layout)."""
    monkeypatch.setenv("JAXEMU_CUDA_SPLIT", "0")
    q, db = data
    s = get_scheme(scheme)
    a, b = q[None], db.T[None]
    for rows_free in (False, True):
        from jaxemu import backends
        with backends.b_rows_free(rows_free):
            own = cuda_fused.split_operands(a, b, s)
            ahead = (cuda_fused.presplit_operand(a, s, "lhs", kernels=True),
                     cuda_fused.presplit_operand(b, s, "rhs", kernels=False))
            given = cuda_fused.split_operands(a, b, s, presplit=ahead)
        for mine, theirs in zip(jax.tree_util.tree_leaves(own), jax.tree_util.tree_leaves(given)):
            assert mine.shape == theirs.shape and mine.dtype == theirs.dtype
            np.testing.assert_array_equal(np.atleast_1d(mine).view(np.uint8), np.atleast_1d(theirs).view(np.uint8))
        for (sl, e, amax), side, x in zip(ahead, ("lhs", "rhs"), (a, b)):
            rows = x.shape[1] if side == "lhs" else x.shape[2]
            want = cuda_fused.presplit_shapes(s, 1, rows, 96)
            assert [(w.shape, w.dtype) for w in want] == [(sl.shape, sl.dtype), (e.shape, e.dtype),
                                                          (amax.shape, amax.dtype)]


def _both(f, *args, transform=lambda g: g, what="", scheme="fp16x3"):
    """f emulated with and without the hoisting, under ``transform``."""
    import os
    outs = []
    for on in ("1", "0"):
        os.environ[hoist.SWITCH] = on
        try:
            outs.append(jax.jit(transform(jaxemu.emulate(f, scheme=scheme)))(*args))
        finally:
            del os.environ[hoist.SWITCH]
    return outs


def _same(x, y, what):
    """Bits on the CPU. On a GPU the two programs also differ in XLA's own
    float32 reductions (softmax, the gradients' sums), which XLA autotunes
    by timing each compilation, so their order of additions may differ
    (our reading of the one failure in 8 runs on an H200, stop 39, which
    was not labelled and did not recur).
    The products' bits are compared on the GPU by tests/test_cuda.py
    (test_a_loop_invariant_operand_is_split_once_before_the_loop)."""
    for a, b in zip(jax.tree_util.tree_leaves(x), jax.tree_util.tree_leaves(y)):
        if jax.default_backend() == "cpu":
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=what)
        else:
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6, err_msg=what)


def test_same_results_under_jit_grad_vmap_jvp(data, monkeypatch):
    q, db = data
    monkeypatch.setenv(STATS, "1")  # (auto's statistics of B too)
    x, c = db, db[:64]
    _same(*_both(search, q, db), what="search")
    _same(*_both(lloyd_like, x, c), what="lloyd")
    _same(*_both(search, q, db, scheme="auto"), what="search, auto")
    # gradients: the tangent products split for themselves
    _same(*_both(lambda q, db: jnp.sum(search(q, db)), q, db, transform=lambda g: jax.grad(g, argnums=(0, 1))),
          what="grad search")
    _same(*_both(lambda x, c: jnp.sum(lloyd_like(x, c) ** 2), x, c,
                 transform=lambda g: jax.grad(g, argnums=(0, 1))), what="grad lloyd")
    # vmap over the queries (the split stays) and over the database (dropped)
    qs, dbs = jnp.stack([q, -q]), jnp.stack([db, 0.5 * db])
    _same(*_both(search, qs, db, transform=lambda g: jax.vmap(g, in_axes=(0, None))), what="vmap queries")
    _same(*_both(search, q, dbs, transform=lambda g: jax.vmap(g, in_axes=(None, 0))), what="vmap database")
    _same(*_both(search, q, db, transform=lambda g: lambda q, db: jax.jvp(g, (q, db), (q, db))), what="jvp")
    # and the result is the scheme's: within FP32's reach of float64
    out = _both(search, q, db)[0]
    q64, db64 = np.asarray(q, np.float64), np.asarray(db, np.float64)
    ref = np.max((2 * (q64 @ db64.T) - np.sum(db64 * db64, axis=1)).reshape(4, 64, -1), axis=2).reshape(4, 64)
    np.testing.assert_allclose(np.asarray(out, np.float64), ref, rtol=0, atol=1e-4 * np.abs(ref).max())


@pytest.mark.skipif(jax.default_backend() != "cpu",
                    reason="on a GPU the kernel reads the split (tests/test_cuda.py counts it)")
@pytest.mark.parametrize("scheme", ["fp16x3", "auto"])
def test_where_no_kernel_reads_it_xla_deletes_the_split(data, monkeypatch, scheme, slice_path):
    """On the CPU the split made ahead (auto: and its statistics of B) is
    dead code: the compiled program holds the same instructions with and
    without it (none of the slice layout's arrays)."""
    import re
    q, db = data
    monkeypatch.setenv(STATS, "1")
    kinds = {}
    for on in ("1", "0"):
        monkeypatch.setenv(hoist.SWITCH, on)
        lowered = jax.jit(jaxemu.emulate(search, scheme=scheme)).lower(q, db)
        assert ("tensor<1x2048x2x2x64xf16>" in lowered.as_text()) == (on == "1")  # bound, then deleted
        hlo = lowered.compile().as_text()
        kinds[on] = sorted(re.findall(r"= ([a-z0-9]+\[[0-9,]*\])", hlo))
        assert "f16[1,2048,2,2,64]" not in hlo  # (the database's slices: 2048 rows, 2 K-tiles, 2 slices)
    assert kinds["1"] == kinds["0"]


def test_transposed_where_the_invariant_operand_is_the_linear_input(data):
    """A function linear in the scan's const is transposed (linear_transpose;
    custom_linear_solve transposes its matvec, as bicgstab and gmres do):
    the split passes no cotangent back, the products give theirs."""
    q, db = data
    lin = jaxemu.emulate(lambda d: jax.lax.map(lambda qc: qc @ d.T, q.reshape(4, -1, 96)), scheme="fp16x3")
    ct = jnp.asarray(np.random.default_rng(3).standard_normal((4, 64, 2048)), jnp.float32)
    (got,) = jax.linear_transpose(lin, db)(ct)
    want = np.einsum("cqd,cqn->nd", np.asarray(q, np.float64).reshape(4, 64, 96), np.asarray(ct, np.float64))
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=0, atol=1e-5 * np.abs(want).max())
    rng = np.random.default_rng(4)
    a = jnp.asarray(np.eye(512) * 4 + rng.standard_normal((512, 512)) * 0.05, jnp.float32)
    b = jnp.asarray(rng.standard_normal((512, 64)), jnp.float32)
    matvec = jaxemu.emulate(lambda x: jax.lax.map(lambda blk: blk @ x, a.reshape(4, 128, 512)).reshape(512, 64),
                            scheme="fp16x3")
    a64 = np.asarray(a, np.float64)
    want = np.linalg.solve(a64, np.asarray(b, np.float64))
    for solve in (jax.scipy.sparse.linalg.bicgstab, jax.scipy.sparse.linalg.gmres):
        # (x0 computed, not the default constant zeros: on jax 0.11.2 that run
        # gives NaN under jit in most processes, hoisted or not, and not under
        # pytest; docs/performance.md, stop 39, open)
        x = jax.jit(lambda b: solve(matvec, b, x0=0.0 * b, tol=1e-7, maxiter=50)[0])(b)
        np.testing.assert_allclose(np.asarray(x, np.float64), want, rtol=0, atol=1e-5 * np.abs(want).max())
