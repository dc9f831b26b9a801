"""Exact operands (FloatSplit.exact): emulate finds the operands a program
builds from bool/int8/uint8 values (one-hot matrices), and the float schemes
take them as one slice. On the CPU (xla backend): which operands are found,
that the result is the full scheme's (bit for bit: the dropped products are
zero) and within the scheme's bound of float64, FP32's special values, and
the flags through grad, jvp and vmap."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxemu
from jaxemu.emulate import exact_vars
from jaxemu import testing as T
from jaxemu.backends import xla as X
from jaxemu.schemes import FloatSplit

FLOAT = ["bf16x3", "bf16x6", "bf16x9", "tf32x3", "fp16x3", "fp16x3_bitcut"]


def flags(f, *args):
    """The exact flags of f's emulated dots, in program order."""
    return [d.info.exact for d in jaxemu.explain(f, *args, scheme="fp16x3")]


def dot_flags(jaxpr):
    """exact params of the jaxemu_dot equations of a (closed) jaxpr, sub-jaxprs included."""
    out = []

    def walk(j):
        for eqn in j.eqns:
            if eqn.primitive is jaxemu.jaxemu_dot_p:
                out.append(eqn.params["exact"])
            for v in eqn.params.values():
                for sub in (v if isinstance(v, (tuple, list)) else (v,)):
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns"):
                        walk(inner)
    walk(jaxpr.jaxpr)
    return out


def onehot_update(x, labels, k=7):
    return jax.nn.one_hot(labels, k, dtype=x.dtype).T @ x


def test_emulate_finds_the_operands_built_from_small_integers(rng):
    x = rng.normal(size=(50, 6)).astype(np.float32)
    lab = rng.integers(0, 7, size=50)
    i8 = jnp.asarray(rng.integers(-128, 128, size=(6, 5)).astype(np.int8))
    u8 = jnp.asarray(rng.integers(0, 256, size=(6, 5)).astype(np.uint8))
    i32 = jnp.asarray(rng.integers(0, 9, size=(6, 5)).astype(np.int32))

    @jax.jit
    def helper(m, y):  # the flag crosses a jit boundary as an argument
        return m @ y

    cases = [
        (lambda x, lab: onehot_update(x, lab), [(True, False)]),                      # jax.nn.one_hot (a jit)
        (lambda x, lab: (lab[:, None] == jnp.arange(7)).astype(jnp.float32).T @ x, [(True, False)]),
        (lambda x, lab: x @ i8.astype(jnp.float32), [(False, True)]),                 # int8 data
        (lambda x, lab: x @ jnp.concatenate([u8.astype(jnp.float32), jnp.zeros((6, 2))], 1), [(False, True)]),
        (lambda x, lab: helper(jax.nn.one_hot(lab, 7).T, x), [(True, False)]),
        (lambda x, lab: jnp.where(x[:7, :1] > 0, jax.nn.one_hot(lab, 7).T[:, :50], 0.0) @ x, [(True, False)]),
        # Not exact: int32 may exceed 256, a product scales the values, data is data.
        (lambda x, lab: x @ i32.astype(jnp.float32), [(False, False)]),
        (lambda x, lab: (2.5 * jax.nn.one_hot(lab, 7)).T @ x, [(False, False)]),
        (lambda x, lab: x.T @ x, [(False, False)]),
    ]
    lab = jnp.asarray(lab)  # traced (a numpy one-hot would be a constant of the program)
    for i, (f, want) in enumerate(cases):
        assert flags(f, x, lab) == want, i
        assert dot_flags(jax.make_jaxpr(jaxemu.emulate(f, scheme="fp16x3"))(x, lab)) == want, i


def test_loop_carries_are_not_exact(rng):
    # A zero initial carry is exact, the carry after one step is not: a
    # loop's body is analysed without its operands' flags (test_emulate's
    # scan RNN caught a version that passed them).
    wh = jnp.asarray(rng.normal(size=(4, 4)).astype(np.float32))
    lab = jnp.asarray(rng.integers(0, 4, size=5))

    def scan_f(wh, lab):
        oh = jax.nn.one_hot(lab, 4)
        h, _ = jax.lax.scan(lambda h, x: (jnp.tanh(h @ wh + oh[:1]), None), jnp.zeros((1, 4)), None, length=3)
        return h

    def while_f(wh, lab):
        return jax.lax.fori_loop(0, 3, lambda i, h: jnp.tanh(h @ wh) + 1.0, jnp.zeros((2, 4)))

    def onehot_in_loop(wh, lab):  # made inside the body: exact there
        return jax.lax.fori_loop(0, 2, lambda i, h: h + jax.nn.one_hot(lab, 4).T @ (h @ wh)[:1].repeat(5, 0),
                                 jnp.ones((4, 4)))
    assert flags(scan_f, wh, lab) == [(False, False)]
    assert flags(while_f, wh, lab) == [(False, False)]
    got = np.asarray(jax.jit(jaxemu.emulate(scan_f, scheme="fp16x3"))(wh, lab))
    np.testing.assert_allclose(got, np.asarray(jax.jit(scan_f)(wh, lab)), rtol=1e-5, atol=1e-6)
    assert flags(onehot_in_loop, wh, lab) == [(False, False), (True, False)]  # h @ wh, then the one-hot


def test_ops_that_change_small_integers_do_not_propagate(rng):
    # An out-of-bounds gather fills NaN (jnp.take's default), float8 rounds
    # 255 to 256 or beyond: neither operand is exact; a clamped gather is.
    x = jnp.asarray(rng.normal(size=(6, 3)).astype(np.float32))
    lab = jnp.asarray(rng.integers(0, 4, size=6))
    idx = jnp.asarray([0, 2, 9])

    def taken(x, lab):
        return jnp.take(jax.nn.one_hot(lab, 4), idx, axis=0).T @ x[:3]

    def indexed(x, lab):
        return jax.nn.one_hot(lab, 4)[idx].T @ x[:3]  # clamped: exact

    def fp8(x, lab):
        oh = (lab[:, None] * 85).astype(jnp.uint8).astype(jnp.float8_e4m3fn).astype(jnp.float32)
        return oh.T @ x

    def bf16(x, lab):
        return jax.nn.one_hot(lab, 4).astype(jnp.bfloat16).astype(jnp.float32).T @ x
    assert flags(taken, x, lab) == [(False, False)]
    assert flags(indexed, x, lab) == [(True, False)]
    assert flags(fp8, x, lab) == [(False, False)]
    assert flags(bf16, x, lab) == [(True, False)]
    # The NaN fill keeps FP32's semantics through the product.
    got = np.asarray(jax.jit(jaxemu.emulate(taken, scheme="fp16x3"))(x, lab))
    want = np.asarray(jax.jit(taken)(x, lab))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(want).any()


def test_exact_vars_follow_the_ops_that_keep_values():
    def f(lab, y):
        oh = (lab[:, None] == jnp.arange(4)).astype(jnp.float32)
        return oh.reshape(-1)[None], jnp.max(oh, axis=0), oh * y[:, None], jnp.pad(oh, 1, constant_values=3.0)
    j = jax.make_jaxpr(f)(jnp.zeros(5, jnp.int32), jnp.ones(5))
    ex = exact_vars(j.jaxpr)
    assert [v in ex for v in j.jaxpr.outvars] == [True, True, False, True]


@pytest.mark.parametrize("name", FLOAT)
def test_exact_operand_gives_the_full_schemes_result(name, rng):
    # The one-slice variant drops only products of zero lo slices: on the xla
    # backend the result is the full scheme's, bit for bit, and within its
    # bound of float64 (FP32-class: at most SGEMM's error, measured here).
    x = T.sample("wide-exp", (300, 33), rng)
    lab = rng.integers(0, 7, size=300)
    got = np.asarray(jax.jit(jaxemu.emulate(lambda x: onehot_update(x, lab), scheme=name))(x))
    oh = np.asarray(jax.nn.one_hot(lab, 7), np.float32)
    full = np.asarray(jaxemu.matmul(oh.T, x, scheme=name))
    np.testing.assert_array_equal(got.view(np.uint32), full.view(np.uint32))
    ref = oh.T.astype(np.float64) @ x.astype(np.float64)
    s = jaxemu.get_scheme(name)
    err = T.relerr(got, ref)
    if s.fp32_class:
        sgemm = T.relerr(np.asarray(jnp.matmul(oh.T, x, precision="highest")), ref)
        assert err <= max(2 * sgemm, 2.0 ** -23), (name, err, sgemm)
    else:
        assert err <= s.error_bound(), (name, err)
    # rhs exact too: int8 data on the right.
    w = rng.integers(-128, 128, size=(33, 9)).astype(np.int8)
    got = np.asarray(jax.jit(jaxemu.emulate(lambda x: x @ w.astype(jnp.float32), scheme=name))(x))
    full = np.asarray(jaxemu.matmul(x, w.astype(np.float32), scheme=name))
    np.testing.assert_array_equal(got.view(np.uint32), full.view(np.uint32))


def test_exact_operand_keeps_fp32_special_values(rng):
    x = rng.normal(size=(40, 8)).astype(np.float32)
    x[3, 2], x[5, :], x[7, 1] = np.inf, np.nan, 3e38
    lab = rng.integers(0, 5, size=40)
    lab[3] = lab[7] = 0
    f = jax.jit(jaxemu.emulate(lambda x: onehot_update(x, lab, 5), scheme="fp16x3"))
    got = np.asarray(f(x))
    want = np.asarray(jnp.matmul(jax.nn.one_hot(lab, 5).T, x, precision="highest"))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-6, atol=1e-30)


def test_flags_through_grad_jvp_and_vmap(rng):
    x = rng.normal(size=(64, 5)).astype(np.float32)
    lab = rng.integers(0, 7, size=64)
    oh = np.asarray(jax.nn.one_hot(lab, 7), np.float64)
    w = rng.normal(size=(7, 5)).astype(np.float32)

    def loss(x):
        return jnp.sum(onehot_update(x, lab) * w)
    g = jax.grad(jaxemu.emulate(loss, scheme="fp16x3"))
    # The cotangent dot: w (not exact) against the one-hot, now on the right.
    assert dot_flags(jax.make_jaxpr(g)(x)) == [(True, False), (False, True)]
    np.testing.assert_allclose(np.asarray(g(x)), oh @ w.astype(np.float64), rtol=1e-6, atol=1e-6)
    t = rng.normal(size=x.shape).astype(np.float32)
    fe = jaxemu.emulate(lambda x: onehot_update(x, lab), scheme="fp16x3")
    _, tangent = jax.jvp(fe, (x,), (t,))
    assert dot_flags(jax.make_jaxpr(lambda x, t: jax.jvp(fe, (x,), (t,)))(x, t)) == [(True, False)] * 2
    assert T.relerr(np.asarray(tangent), oh.T @ t.astype(np.float64)) <= 2.0 ** -22
    xb = np.stack([x, -3 * x])
    got = np.asarray(jax.vmap(fe)(xb))
    assert dot_flags(jax.make_jaxpr(jax.vmap(fe))(xb)) == [(True, False)]
    assert T.relerr(got[1], -3 * (oh.T @ x.astype(np.float64))) <= 2.0 ** -22


def test_with_exact_products_and_bound():
    for name in FLOAT:
        s = jaxemu.get_scheme(name)
        a, b = s.with_exact(True, False), s.with_exact(False, True)
        assert all(i == 0 for i, _ in a.products) and all(j == 0 for _, j in b.products)
        assert {(j, i) for i, j in a.products} == set(b.products)
        assert a.slices_of(0) == 1 and a.slices_of(1) == s.slices and a.exact == (True, False)
        assert a.unit_roundoff <= s.unit_roundoff and a.fp32_class == s.fp32_class
        assert s.with_exact(False, False) is s and a.with_exact(True, False) is a
        assert "lhs exact" in a.describe()
    with pytest.raises(ValueError, match="exact"):
        FloatSplit("bad", "bf16", 2, ((0, 0), (1, 0)), exact=(True, False))
    with pytest.raises(ValueError, match="two bools"):
        FloatSplit("bad", "bf16", 2, ((0, 0),), exact=(1, 0))


def test_explain_names_the_exact_operand(rng):
    x = rng.normal(size=(30, 4)).astype(np.float32)
    lab = rng.integers(0, 3, size=30)
    rep = jaxemu.explain(lambda x: onehot_update(x, lab, 3), x, scheme="bf16x6")
    assert "lhs holds small integers" in rep[0].reason and "3 of 6 products" in rep[0].reason


def test_split_operand_of_an_exact_side_is_the_operand(rng):
    s = jaxemu.get_scheme("fp16x3").with_exact(False, True)
    a = jnp.asarray(rng.normal(size=(1, 4, 8)).astype(np.float32))
    b = jnp.asarray(rng.integers(0, 2, size=(1, 8, 3)).astype(np.float32))
    (a_sl, ea), (b_sl, eb) = X.split_operands(a, b, s)
    assert len(a_sl) == 2 and ea is not None and len(b_sl) == 1 and eb is None
    assert b_sl[0] is b


def test_auto_runs_the_exact_variants(rng):
    # auto on a one-hot product: the same candidates' one-slice variants,
    # costed at their measured share of the full scheme's time (a product
    # too small to pay in full can pay with it), its data test without the
    # exact side's representation error, FP32's accuracy.
    from jaxemu import auto
    from jaxemu.schemes import Auto
    s = jaxemu.get_scheme("auto")
    assert auto.exact_share("fp16x3", (True, False)) == auto.EXACT_SHARE[""]["fp16x3"] < 1
    assert auto.exact_share("bf16x6", (False, True)) == auto.EXACT_SHARE[""]["bf16x6"] < 1
    assert auto.exact_share("bf16x6", (True, False), "f32") == auto.EXACT_SHARE["f32"]["bf16x6"] < 1
    assert auto.exact_share("tf32x3", (False, True)) == 2 / 3  # no measurement: the share of products
    assert auto.exact_share("fp16x3", (True, False), "f32") == 2 / 3  # no such path: the share of products
    assert auto.exact_share("fp32", (True, False)) == 1.0 and auto.exact_share("fp16x3", (False, False)) == 1.0
    from jaxemu import costs
    model = costs.model_for("NVIDIA H200", "cuda")
    shape = (1, 1024, 256, 1 << 20)  # the k-means update: (B, M, N, K)
    one_hot = auto.plan(1, 1024, 256, 1 << 20, s, model=model, exact=(True, False))
    # Each candidate is priced on the path its variant takes, at that path's
    # measured share: bf16x6 on the FP32-operand kernel, fp16x3 on the slice
    # path. The H200 measured the same order (onehot_bench.py, stop 35:
    # bf16x6 5.22 ms, fp16x3 5.68 ms).
    assert model.priced_path("bf16x6", shape, exact=(True, False)) == "f32"
    assert model.priced_path("fp16x3", shape, exact=(True, False)) == ""
    t6 = model.time("bf16x6", shape, "f32") * auto.EXACT_SHARE["f32"]["bf16x6"]
    assert t6 < model.time("fp16x3", shape, "") * auto.EXACT_SHARE[""]["fp16x3"]
    # bf16x6 the fastest: it runs where its range test allows, else FP32
    assert [(c.scheme, c.hybrid) for c in one_hot.candidates] == [("bf16x6", False), ("fp32", False)], one_hot
    # (its time: the product's and its test's, which reads B alone: the one-hot's bounds stand in)
    t_test = costs.data_test_time(shape, (True, False), ranges_only=True)
    assert t_test < costs.data_test_time(shape, (True, False)) < costs.data_test_time(shape)
    assert one_hot.candidates[0].time == pytest.approx(t6 + t_test)
    # A shape where emulation in full does not pay but a one-slice variant does.
    assert auto.plan(1, 1536, 1536, 1536, s, model=model).static == "fp32"
    assert auto.plan(1, 1536, 1536, 1536, s, model=model, exact=(True, False)).static is None
    x = T.sample("normal(0,1)", (4096, 300), rng)
    lab = jnp.asarray(rng.integers(0, 50, size=4096))
    f = jax.jit(jaxemu.emulate(lambda x, lab: onehot_update(x, lab, 50), scheme="auto"))
    got = np.asarray(f(x, lab))
    oh = np.asarray(jax.nn.one_hot(lab, 50), np.float32)
    ref = oh.T.astype(np.float64) @ x.astype(np.float64)
    sgemm = T.relerr(np.asarray(jnp.matmul(oh.T, x, precision="highest")), ref)
    assert T.relerr(got, ref) <= 2 * max(sgemm, 2.0 ** -24)
    # The data test: only the inexact side's error counts.
    a = jnp.asarray(oh.T)[None]
    b = jnp.asarray(x)[None]
    both = auto.DataTest.of(a, b, Auto("a"))
    lhs_exact = auto.DataTest.of(a, b, Auto("a"), (True, False))
    assert float(lhs_exact.normwise_ratio[0]) < float(both.normwise_ratio[0])


def test_auto_passes_an_exact_operand_to_its_conditional_in_16_bits(rng):
    # An operand of a conditional is written to memory whichever branch runs:
    # auto's test and branches take the exact operand in the fastest
    # candidate's slice format (fp16 for fp16x3), never in float32, and give
    # FP32's accuracy on the branch taken (fp16x3) and on the refused path
    # (bf16x6 here; the hybrids are not reached by this data).
    from jaxemu import auto
    from jaxemu.backends import product_for
    from jaxemu.schemes import Auto
    s = Auto(min_flops=0, min_dim=0, cost_model="counts")
    lab = jnp.asarray(rng.integers(0, 50, size=4096))
    a = jax.nn.one_hot(lab, 50, dtype=jnp.float32).T[None]
    b = jnp.asarray(T.sample("normal(0,1)", (4096, 300), rng))[None]
    product = product_for("cpu", "xla")

    def f(a, b):
        return auto.auto_dot(a, b, s, "cpu", product, exact=(True, False))
    conds = [e for e in jax.make_jaxpr(f)(a, b).jaxpr.eqns if e.primitive.name == "cond"]
    assert len(conds) == 1, conds
    ops = [v.aval for v in conds[0].invars]
    assert any(x.shape == a.shape and x.dtype == jnp.float16 for x in ops), ops
    assert not any(x.shape == a.shape and x.dtype == jnp.float32 for x in ops), ops
    candidates = auto.plan(1, 50, 300, 4096, s, "cpu", "xla", exact=(True, False)).candidates
    x = T.sample("normal(0,1)", (4096, 300), rng)
    # normal data takes fp16x3; with exponents spread over 40 binades a few
    # products dominate each entry and the test refuses it (bf16x6 runs).
    for x, want in ((x, "fp16x3"), (x * np.exp2(rng.integers(-20, 20, size=x.shape)).astype(np.float32), "bf16x6")):
        bb = jnp.asarray(x)[None]
        assert candidates[int(auto.choice_index(candidates, auto.DataTest.of(a, bb, s, (True, False))))].label == want
        ref = np.asarray(a[0], np.float64) @ np.asarray(bb[0], np.float64)
        sgemm = T.relerr(np.asarray(jnp.matmul(a[0], bb[0], precision="highest")), ref)
        assert T.relerr(np.asarray(jax.jit(f)(a, bb)[0]), ref) <= 2 * max(sgemm, 2.0 ** -24), want


def test_auto_passes_an_exact_operand_in_float32_where_its_fastest_candidate_reads_float32():
    # bf16x6 on the FP32-operand kernel (the k-means update on the cuda
    # backend) reads the one-hot in float32: auto's conditional passes it so,
    # rather than in bf16 that its branch would convert back.
    from jaxemu import auto
    cands = (auto.Candidate("bf16x6", 1.0), auto.Candidate("fp16x3", 2.0), auto.Candidate("fp32", 3.0))
    assert auto._exact_format(cands) == jnp.bfloat16
    assert auto._exact_format(cands, lambda c: "f32" if c.scheme == "bf16x6" else "") == jnp.float32
    assert auto._exact_format(cands[1:], lambda c: "f32" if c.scheme == "bf16x6" else "") == jnp.float16
    # the path each candidate takes, as auto_dot asks it of the cost model's paths
    from jaxemu import costs
    update = (1, 1024, 256, 1 << 20)
    assert costs.path_of("cuda", "bf16x6", update, (True, False)) == "f32"
    assert costs.path_of("xla", "bf16x6", update, (True, False)) == ""


def test_auto_tests_only_bf16x6s_range_where_bf16x6_is_fastest(rng, monkeypatch):
    # Where bf16x6 is the fastest candidate auto's plan is bf16x6 or FP32,
    # and its test needs the exponent ranges alone: no probe, and an exact
    # operand's bounds (|x| <= 256 integers) instead of a pass over it.
    from jaxemu import auto, costs
    from jaxemu.backends import product_for
    from jaxemu.schemes import Auto
    # A model in which bf16x6 is the faster (the H200's, fp16x3 priced at twice its times)
    pts = costs._h200_points()
    pts["fp16x3"] = {shape: 2 * t for shape, t in pts["fp16x3"].items()}
    model = costs.CostModel.from_points("NVIDIA H200", "cuda", "test", pts)
    dense = auto.plan(1, 1024, 256, 1 << 20, jaxemu.get_scheme("auto"), model=model)  # the dense k-means update
    assert [(c.scheme, c.hybrid) for c in dense.candidates] == [("bf16x6", False), ("fp32", False)], dense
    assert "bf16x6 is the fastest" in dense.reason
    # the statistics of the exact side are its bounds, and do not read it
    lab = rng.integers(0, 50, size=4096)
    a = jax.nn.one_hot(jnp.asarray(lab), 50, dtype=jnp.float32).T[None]
    x = T.sample("normal(0,1)", (4096, 300), rng)
    b = jnp.asarray(x)[None]
    jaxpr = jax.make_jaxpr(lambda a, b: auto.operand_stats(a, b, False, None, (True, False)))(a, b).jaxpr
    assert not any(v is jaxpr.invars[0] for e in jaxpr.eqns for v in e.invars)
    st = auto.operand_stats(a, b, False, None, (True, False))
    full = auto.operand_stats(a, b, False)
    assert np.all(np.asarray(st.a_max) >= np.asarray(full.a_max)) and np.all(np.asarray(st.a_max) == 256)
    assert np.all(np.asarray(st.a_min) <= np.asarray(full.a_min)) and not np.any(np.asarray(st.a_bad))
    np.testing.assert_array_equal(np.asarray(st.b_max), np.asarray(full.b_max))
    # a narrowed (16-bit) exact operand is not read either
    a16 = a.astype(jnp.bfloat16)
    jaxpr = jax.make_jaxpr(lambda a, b: auto.operand_stats(a, b, False, None, (True, False)))(a16, b).jaxpr
    assert not any(v is jaxpr.invars[0] for e in jaxpr.eqns for v in e.invars)
    # auto_dot with that plan: bf16x6 where its range allows, FP32 where it refuses
    s = Auto(min_flops=0, min_dim=0, cost_model="counts")
    monkeypatch.setattr(auto, "plan", lambda *args, **kw: auto.AutoPlan(
        (auto.Candidate("bf16x6", 1.0), auto.Candidate("fp32", 2.0)), "test", "test"))
    product = product_for("cpu", "xla")
    f = jax.jit(lambda a, b: auto.auto_dot(a, b, s, "cpu", product, exact=(True, False)))
    # its test takes the ranges alone, with the exact side's bounds
    seen = []
    stats = auto.operand_stats
    monkeypatch.setattr(auto, "operand_stats", lambda *args, **kw: seen.append(kw) or stats(*args, **kw))
    jax.make_jaxpr(lambda a, b: auto.auto_dot(a, b, s, "cpu", product, exact=(True, False)))(a, b)
    assert [(kw["normwise"], kw["exact"]) for kw in seen] == [(False, (True, False))], seen
    want6 = jaxemu.dot(a[0], b[0], scheme="bf16x6")
    np.testing.assert_array_equal(np.asarray(f(a, b)[0]), np.asarray(want6))
    huge = jnp.asarray(x * np.float32(2.0 ** 110))[None]  # past bf16x6's window (SAFE_MAX_EXP), finite in FP32
    ref = np.asarray(a[0], np.float64) @ np.asarray(huge[0], np.float64)
    got = np.asarray(f(a, huge)[0])
    assert np.all(np.isfinite(got))
    np.testing.assert_array_equal(got, np.asarray(jnp.matmul(a[0], huge[0], precision="highest")))
    assert T.relerr(got, ref) <= 2.0 ** -20
