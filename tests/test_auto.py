"""The auto scheme: safe on adversarial data, fastest safe choice, FP32 where
emulation does not pay; its two data tests (normwise, the default, and
componentwise)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxemu
from jaxemu import auto
from jaxemu import testing as T
from jaxemu.backends import xla

# Thresholds off and the device-independent cost model, so that small CPU
# problems exercise the data-dependent choice.
AUTO = jaxemu.get_scheme("auto").replace(min_flops=0.0, min_dim=0, block=32, cost_model="counts")
AUTO_CW = AUTO.replace(criterion="componentwise")
auto_dot = jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme=AUTO))  # one compilation per shape, shared
auto_cw_dot = jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme=AUTO_CW))
fp32_dot = jax.jit(lambda a, b: jax.lax.dot(a, b, precision="highest"))


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
def test_componentwise_auto_is_never_worse_than_bf16x6s_bound(kind, rng):
    a, b = adversarial(kind, rng)
    ref, b6 = bound(a, b)
    c = auto_cw_dot(a, b)
    assert T.componentwise_err(c, a, b, ref) <= b6


def fp32_expected_err(a, b, ref, orders=8):
    """FP32's relative Frobenius error, root mean square over K-summation
    orders: where one entry carries most of ||C||_F (rows and columns scaled
    by 2^+-60), one product's error is one random draw, and FP32's luck on
    it must not decide the bound."""
    rng = np.random.default_rng(0)
    perms = [np.arange(a.shape[1])] + [rng.permutation(a.shape[1]) for _ in range(orders - 1)]
    return float(np.sqrt(np.mean([T.relerr(fp32_dot(a[:, p], b[p]), ref) ** 2 for p in perms])))


@pytest.mark.parametrize("kind", KINDS)
def test_normwise_auto_stays_within_fp32s_error(kind, rng):
    """The default test bounds what fp16x3's lost bits add to 2^-26 ||C||_F;
    with fp16x3's ordinary rounding FP32-class, auto's error stays within
    2x FP32's plus that budget, on every adversarial construction."""
    a, b = adversarial(kind, rng)
    ref = T.reference(a, b)
    assert T.relerr(auto_dot(a, b), ref) <= 2 * fp32_expected_err(a, b, ref) + 2.0**auto.BUDGET_EXP


def fp16x3_in_float64(a, b):
    """fp16x3 as jaxemu splits it, with the three slice products and their
    sum in float64: its representation and dropped lo x lo term, no rounding
    of the sums."""
    s = jaxemu.get_scheme("fp16x3")
    (ha, la), ea = xla.split_float(jnp.asarray(a)[None], s, axis=2)
    (hb, lb), eb = xla.split_float(jnp.asarray(b)[None], s, axis=1)
    f = lambda x: np.asarray(x, np.float64)[0]  # noqa: E731
    c = f(ha) @ f(hb) + (f(ha) @ f(lb) + f(la) @ f(hb)) * 2.0 ** -s.lo_scale_bits
    return c * np.exp2(-(f(ea) + f(eb)))


def lost_bit_bound(a, b):
    """The normwise test's per-entry bound on what fp16x3 loses beyond its
    ordinary rounding: 2^FP16X3_FLOOR_EXP (amax_i ||b_j||_1 + ||a_i||_1 bmax_j)."""
    a, b = np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))
    return 2.0 ** auto.FP16X3_FLOOR_EXP * (a.max(1)[:, None] * b.sum(0)[None] + a.sum(1)[:, None] * b.max(0)[None])


def spread_values(shape, binades, rng, mantissa_bits=None):
    """Random signs, exponents spread over ``binades`` below 1, mantissas of
    ``mantissa_bits`` significant bits (None: full float32)."""
    m = (rng.integers(2 ** (mantissa_bits - 1), 2 ** mantissa_bits, shape) / 2.0 ** (mantissa_bits - 1)
         if mantissa_bits else rng.uniform(1, 2, shape))
    return (rng.choice([-1, 1], shape) * m * np.exp2(-rng.integers(0, binades, shape))).astype(np.float32)


@pytest.mark.parametrize("binades", [30, 50, 80])
def test_the_lost_bit_bound_holds_for_every_entry(binades, rng):
    """The derivation behind the normwise test, checked exactly: with 11-bit
    mantissas fp16x3's ordinary rounding is exact, so all of its error is
    lost bits, within the bound; with full mantissas, within the bound plus
    the ordinary 3 x 2^-22 |A||B|. Tiny partners (values far below their
    row's maximum meeting the largest of the other operand) included."""
    for bits in (11, None):
        a = spread_values((48, 96), binades, rng, bits)
        b = spread_values((96, 40), binades, rng, bits)
        a[:, 5] *= 2.0 ** -30  # tiny partners: column 5 of A far below its rows' maxima ...
        b[5, :] = np.abs(b).max(0) * 2.0 ** 20  # ... meets each column's largest value (11 bits too)
        err = np.abs(fp16x3_in_float64(a, b) - T.reference(a, b))
        ordinary = 0.0 if bits else 3 * 2.0**-22 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
        assert np.all(err <= lost_bit_bound(a, b) + ordinary)
        if bits:
            assert err.max() > 0  # bits were lost: the bound was exercised


def test_the_normwise_statistic_matches_its_definition(rng):
    """auto's normwise ratio, computed in one pass per operand in float32
    with power-of-two scaling, is twice E / (2^-26 ||A b_j||) (the factor 2
    covers its own rounding), up to the probe's rounding allowance; data
    near the float32 range ends included."""
    for scale in (1.0, 2.0**-100, 2.0**100):
        a = (spread_values((64, 128), 40, rng) * scale).astype(np.float32)
        b = spread_values((128, 48), 40, rng)
        A, B = a.astype(np.float64), b.astype(np.float64)
        e_frob = np.linalg.norm(lost_bit_bound(a, b)[:1]) * 0  # (E is normwise, from the norms:)
        amax, la, bmax, lb = np.abs(A).max(1), np.abs(A).sum(1), np.abs(B).max(0), np.abs(B).sum(0)
        e_frob = 2.0 ** auto.FP16X3_FLOOR_EXP * (np.linalg.norm(amax) * np.linalg.norm(lb)
                                                  + np.linalg.norm(la) * np.linalg.norm(bmax))
        assert e_frob >= np.linalg.norm(lost_bit_bound(a, b))  # the norm form bounds the entrywise one
        exact = 2 * e_frob / (2.0 ** auto.BUDGET_EXP * np.linalg.norm(A @ B[:, np.argmax(lb)]))
        test = auto.DataTest.of(jnp.asarray(a)[None], jnp.asarray(b)[None], AUTO)
        assert exact <= float(test.normwise_ratio[0]) <= 1.05 * exact


def test_the_probe_gathered_in_a_fusion_of_its_own_is_the_same_probe(monkeypatch, rng):
    """The optimization barriers around a long probe column's gather
    (auto.PROBE_FENCE_MIN) change no statistic: the same bits with and
    without them, NaN and Inf in B included."""
    a = T.sample("wide-exp", (2, 40, 96), rng)
    b = T.sample("normal(0,1)", (2, 96, 24), rng)
    b[1, 5, 3], b[0, 7, 9] = np.nan, np.inf

    def stats():
        st = jax.jit(lambda a, b: auto.operand_stats(a, b))(a, b)
        return [np.asarray(x) for x in st if x is not None]

    monkeypatch.setattr(auto, "PROBE_FENCE_MIN", 1)
    fenced = stats()
    monkeypatch.setattr(auto, "PROBE_FENCE_MIN", 1 << 62)
    for x, y in zip(fenced, stats(), strict=True):
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))


def test_normwise_auto_takes_fp16x3_on_the_benchmark_laws(rng):
    """Every law of the benchmark (K = 1024 here) passes, with fp16x3's error
    below FP32's on each."""
    for law in T.LAWS:
        a, b = T.sample(law, (48, 1024), rng), T.sample(law, (1024, 32), rng)
        rep = jaxemu.auto_report(a, b, AUTO)
        assert rep["scheme"] == "fp16x3" and rep["test"]["ratio"] < 0.01, (law, rep)
        ref = T.reference(a, b)
        assert T.relerr(auto_dot(a, b), ref) <= T.relerr(fp32_dot(a, b), ref), law


@pytest.mark.parametrize("m", [1, 2, 3, 1000, 1 << 16, 70001])
def test_the_probes_norms_are_summed_pairwise_within_their_bound(m, rng):
    """The lower bound on ||C||'s probe column takes its norms from a fixed
    tree of adds: within (ceil(log2 M) + 3) u of float64's, where a float32
    reduction over M values guarantees only M u."""
    x = np.asarray(T.sample("wide-exp", (2, m), rng), np.float32) * np.float32(2.0 ** -40)
    got = np.asarray(jax.jit(auto._norm_pairwise)(jnp.asarray(x)), np.float64)
    ref = np.linalg.norm(x.astype(np.float64), axis=1)
    assert np.all(np.abs(got - ref) <= auto._tree_roundings(m) * 2.0 ** -24 * ref), (got, ref)


def test_the_probes_lower_bound_survives_a_million_rows():
    """The k-means distances' M = 2^20 rows with a probe column whose entries
    are 1/20 of |A| |b_j|'s (normal data, K = 256): the norms' float32 bound
    (2 M u = 1/8 of ||z||) left no lower bound on ||C|| (ratio inf, fp16x3
    refused); summed pairwise, the bound is (1 - ~1e-5) ||y|| and the
    test passes."""
    m = 1 << 20
    one = jnp.ones((1, m), jnp.float32)
    st = auto.Stats(a_max=one, a_min=one * 0.5, a_l1=one * 64.0, b_max=jnp.ones((1, 8)), b_min=jnp.ones((1, 8)) * 0.5,
                    b_l1=jnp.ones((1, 8)) * 64.0, y=one * 3.2, z=one * 64.0, m=one, q=one * 64.0,
                    eb=jnp.array([6], jnp.int32))
    test = auto.DataTest(st, (m, 256, 8), "normwise")
    ratio = float(test.normwise_ratio[0])
    assert np.isfinite(ratio) and bool(test.fp16x3_ok), ratio
    gamma_old = 2 * (256 + 2 * m + 2) * 2.0 ** -24       # the float32 norms' allowance
    assert 3.2 - gamma_old * 64.0 < 0                     # which had no lower bound here


@pytest.mark.parametrize("k", [1, 7, 255, 4095, 4096, 4104, 6152, 70001, 1 << 20])
def test_the_stats_kernels_probe_bound_covers_their_summation_chains(k):
    """cuda_stats.probe_roundings against the row kernel's longest chain of
    roundings (ffi/stats/row_stats.cuh), for every element size and lane
    count it runs: a thread's values in sequence (16-byte vectors of 16 /
    itemsize values in turn, or single values where K is not a multiple),
    the shuffle levels, the block's 7 merges of warp partials, one rounding
    per product."""
    from jaxemu.backends import cuda_stats
    for itemsize in (2, 4):
        vec = 16 // itemsize
        threads = [256] if k >= 4096 else [4, 8, 16, 32]
        for t in threads:
            per_thread = -(-(k // vec) // t) * vec if k % vec == 0 else -(-k // t)
            merges = (5 + 7) if t == 256 else t.bit_length() - 1
            assert cuda_stats.probe_roundings(k) >= per_thread - 1 + merges + 1, (k, itemsize, t)


def test_the_stats_kernels_python_side_covers_what_the_grid_cannot():
    """cuda_stats.columns past the column kernel's batch limit (the grid's
    z) and rows with K = 0 need no kernel: XLA's reductions and the empty
    statistics (runs on the CPU)."""
    from jaxemu.backends import cuda_stats
    b = jnp.asarray(np.random.default_rng(0).normal(size=(cuda_stats.MAX_COLUMN_BATCH + 1, 3, 2)), jnp.float32)
    b = b.at[0, 0, 0].set(jnp.nan).at[1, :, 1].set(0.0)
    got = jax.jit(cuda_stats.columns)(b)
    x = np.abs(np.where(np.isfinite(np.asarray(b)), np.asarray(b), 0.0))
    np.testing.assert_array_equal(got[0], x.max(1))
    np.testing.assert_array_equal(got[1], np.where(x > 0, x, np.inf).min(1))
    np.testing.assert_allclose(got[2], x.sum(1), rtol=1e-6)
    np.testing.assert_array_equal(got[3], (~np.isfinite(np.asarray(b))).any(1))
    rows = cuda_stats.rows(jnp.zeros((2, 3, 0), jnp.float32), jnp.zeros((2, 0), jnp.float32))
    assert len(rows) == 8 and np.all(np.isinf(rows[1])) and all(np.all(np.asarray(r) == 0) for i, r in enumerate(rows)
                                                                if i != 1)


def test_normwise_auto_takes_fp16x3_on_a_long_centre_update(rng):
    """A k-means centre update on structureless normal data, K = 2^18: the
    probe's column sums are ~1/50 of |A| |b_j|'s, below a float32
    reduction's guarantee over K (2K u = 1/32); summed in blocks of 256 and
    then pairwise (xla_probe_roundings: 267 roundings), the probe bounds ||C||
    and the test passes fp16x3, whose error stays within FP32's."""
    k, m, n = 1 << 18, 64, 128
    lab = rng.integers(0, m, size=k)
    oh = np.zeros((m, k), np.float32)
    oh[lab, np.arange(k)] = 1.0
    x = T.sample("normal(0,1)", (k, n), rng)
    test = auto.DataTest.of(jnp.asarray(oh)[None], jnp.asarray(x)[None], AUTO, (True, False))
    assert bool(test.fp16x3_ok), float(test.normwise_ratio[0])
    assert 2 * k * 2.0 ** -24 > 1 / 50                     # the float32 reduction's allowance had no bound
    f = jax.jit(jaxemu.emulate(lambda lab, x: jax.nn.one_hot(lab, m, dtype=x.dtype).T @ x, scheme=AUTO))
    ref = oh.astype(np.float64) @ x.astype(np.float64)
    assert T.relerr(f(jnp.asarray(lab), jnp.asarray(x)), ref) <= 2 * T.relerr(fp32_dot(oh, x), ref)


def test_row_scales_from_the_tests_maxima_are_the_splits(rng):
    """auto hands fp16x3 the row scaling from its test's maxima
    (backends.row_scales): the same exponents as the split's own pass, on
    every exponent, zero rows, subnormals and NaN/Inf."""
    from jaxemu import backends
    a = T.sample("wide-exp", (2, 40, 300), rng) * np.float32(2.0 ** -100)
    b = T.sample("wide-exp", (2, 300, 24), rng) * np.float32(2.0 ** 90)
    a[0, 3], b[1, :, 5] = 0.0, 0.0
    a[1, 2, :4] = [np.nan, np.inf, -np.inf, 1e-45]
    b[0, :2, 7] = [np.inf, 3e-44]
    a, b = jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)
    st = auto.operand_stats(a, b)
    ea, eb = backends.row_scales(st.a_max, st.b_max)
    np.testing.assert_array_equal(ea, xla.row_scale_exponents(a, 2)[:, :, 0])
    np.testing.assert_array_equal(eb, xla.row_scale_exponents(b, 1)[:, 0, :])


@pytest.mark.parametrize("t", [34, 40, 50])
def test_normwise_auto_refuses_fp16x3_where_it_loses_bits(t, rng):
    """Tiny partners 2^-t: fp16x3 there is 10x or more FP32's error; auto's
    test refuses it and auto stays within 2x FP32's."""
    a, b = adversarial("plain", rng)
    a[:, 7] *= 2.0**-t
    b[7, :] *= 2.0**t
    ref = T.reference(a, b)
    e32 = fp32_expected_err(a, b, ref)
    assert T.relerr(jaxemu.matmul(a, b, scheme="fp16x3"), ref) >= 10 * e32
    assert jaxemu.auto_report(a, b, AUTO)["test"]["fp16x3"] is False
    assert T.relerr(auto_dot(a, b), ref) <= 2 * e32


def test_normwise_auto_refuses_fp16x3_on_sums_of_few_products(rng):
    """Rows of A with 8 nonzeros (of K = 160): FP32 sums 8 products and makes
    few roundings, fp16x3 keeps 22 bits per value (1.3x FP32's error and
    more); the term count refuses it. With 64 nonzeros fp16x3 is the more
    accurate one, and passes."""
    for nnz, passes in ((8, False), (64, True)):
        a, b = adversarial("plain", rng)
        a[np.argsort(rng.uniform(size=a.shape), axis=1) >= nnz] = 0.0  # nnz random entries per row
        rep = jaxemu.auto_report(a, b, AUTO)
        assert rep["test"]["fp16x3"] is passes and (rep["test"]["terms"] >= auto.MIN_TERMS) is passes
        assert rep["test"]["ratio"] < 0.01  # the lost-bit part passes either way
        ref = T.reference(a, b)
        e32 = fp32_expected_err(a, b, ref)
        e16 = T.relerr(jaxemu.matmul(a, b, scheme="fp16x3"), ref)
        assert (e16 <= e32) if passes else (e16 >= 1.3 * e32)
        assert T.relerr(auto_dot(a, b), ref) <= e32


def test_normwise_hybrid_gives_few_term_rows_to_bf16x6(rng):
    """Half the rows of A spread over 2^+-40: in most of them an entry of C
    is a sum of few products that matter. Those rows run bf16x6, the others
    fp16x3, and C's rows come back in place."""
    a, b = adversarial("half the rows wide", rng)
    rep = jaxemu.auto_report(a, b, AUTO)
    assert rep["scheme"] == "fp16x3+bf16x6" and rep["split"]["cols"] == b.shape[1]
    p = rep["split"]["rows"]
    order = np.asarray(auto.DataTest.of(jnp.asarray(a)[None], jnp.asarray(b)[None], AUTO).order[0][0])
    fast, rest = np.sort(order[:p]), np.sort(order[p:])
    # The term count of each row (float64, from its definition) against the probed column of B.
    t = np.abs(a.astype(np.float64)) * np.abs(b[:, np.argmax(np.abs(b).sum(0))].astype(np.float64))
    terms = (t ** 0.125).sum(1) / t.max(1) ** 0.125
    assert (terms < auto.MIN_TERMS).sum() >= a.shape[0] // 4 and (terms[fast] >= auto.MIN_TERMS).all()
    c = np.asarray(auto_dot(a, b))
    np.testing.assert_array_equal(c[fast], jaxemu.dot(a[order[:p]], b, scheme="fp16x3")[np.argsort(order[:p])])
    np.testing.assert_array_equal(c[rest], jaxemu.dot(a[order[p:]], b, scheme="bf16x6")[np.argsort(order[p:])])


@pytest.mark.parametrize("kind", ["plain", "half the rows wide"])  # a pure and a hybrid run
@pytest.mark.parametrize("criterion", ["normwise", "componentwise"])
def test_auto_with_nan_inf_islands_matches_fp32s_pattern(kind, criterion, rng):
    from test_special_values import ieee_reference
    a, b = adversarial(kind, rng)
    a[10:14, 20:24] = np.inf
    a[40, 50] = np.nan
    b[100:103, 5:8] = -np.inf
    s = AUTO.replace(criterion=criterion)
    assert jaxemu.auto_report(a, b, s)["scheme"] == ("fp16x3" if kind == "plain" else "fp16x3+bf16x6")
    ref = ieee_reference(a, b)
    c = np.asarray((auto_dot if criterion == "normwise" else auto_cw_dot)(a, b), np.float64)
    np.testing.assert_array_equal(np.isnan(c), np.isnan(ref))
    np.testing.assert_array_equal(np.isposinf(c), np.isposinf(ref))
    np.testing.assert_array_equal(np.isneginf(c), np.isneginf(ref))
    fin = np.isfinite(ref)
    assert np.abs(c[fin] - ref[fin]).max() <= 1e-5 * np.abs(ref[fin]).max()


def test_the_tests_statistics_tell_when_fp32s_special_values_cannot_matter(rng):
    """Stats.fits: True exactly where A and B are finite and no product of
    theirs can overflow (xla.product_fits), from the statistics the test
    already has (a_bad, b_bad: rows / columns holding NaN or +-Inf)."""
    a, b = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((40, 70), (70, 30)))
    fits = jax.jit(lambda a, b: auto.operand_stats(a[None], b[None]).fits(a.shape[1]))
    assert bool(fits(a, b))
    for where, value in (((a, 3, 5), np.nan), ((a, 39, 69), np.inf), ((b, 0, 29), -np.inf)):
        x, i, j = where
        old, x[i, j] = x[i, j], value
        st = auto.operand_stats(a[None], b[None])
        assert not bool(fits(a, b)), (i, j, value)
        side = st.a_bad if x is a else st.b_bad
        assert np.asarray(side)[0, i if x is a else j] == 1 and np.asarray(side).sum() == 1
        x[i, j] = old
    big = a.copy()
    big[0, 0] = 2.0 ** 60                                      # 2^60 * 1 * 70 >= 2^100? no: fits
    assert bool(fits(big, b))
    big[0, 0] = 2.0 ** 95                                      # 2^95 * ~1 * 70 > 2^100: may overflow
    assert not bool(fits(big, b))


def _conds(jaxpr, out):
    """Every cond equation in a closed jaxpr and its sub-jaxprs."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "cond":
            out.append(eqn)
        for p in eqn.params.values():
            for sub in (p if isinstance(p, (tuple, list)) else (p,)):
                if hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):
                    _conds(sub.jaxpr, out)
                elif hasattr(sub, "eqns"):
                    _conds(sub, out)
    return out


def test_auto_runs_fp16x3_without_a_special_value_conditional_on_finite_data(rng):
    """auto's conditional has a branch for fp16x3 on data that Stats.fits:
    that branch holds no conditional of its own (on a GPU each costs a
    device-to-host copy of its predicate and a launch gap); the fp16x3
    branch for other data keeps FP32's special-value rules."""
    from jaxemu.backends import product_for
    a, b = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((96, 160), (160, 64)))
    program = jax.make_jaxpr(lambda a, b: auto.auto_dot(a[None], b[None], AUTO, "cpu", product_for("cpu")))(a, b)
    top = [e for e in _conds(program.jaxpr, []) if len(e.params["branches"]) == 3]
    assert len(top) == 1
    refused, specials, fits = top[0].params["branches"]
    assert not _conds(fits.jaxpr, []) and _conds(specials.jaxpr, [])


def test_componentwise_auto_picks_the_fastest_safe_scheme(rng):
    inrange = (rng.choice([-1, 1], (128, 256)) * np.exp2(rng.uniform(-8, 0, (128, 256)))).astype(np.float32)
    assert jaxemu.auto_report(inrange, inrange.T, AUTO_CW)["scheme"] == "fp16x3"
    wide = T.sample("wide-exp", (128, 256), rng)
    rep = jaxemu.auto_report(wide, inrange.T, AUTO_CW)
    assert rep["scheme"] == "bf16x6" and rep["blocks"]["fp32"] == 0
    extreme = inrange.copy()
    extreme[0, 0] = 2.0**110
    rep = jaxemu.auto_report(extreme, inrange.T, AUTO_CW)
    assert rep["scheme"] == "fp32" and rep["blocks"]["fp32"] == 128 // 32  # one row panel x all 4 column panels
    # Block counts follow mask_C = mask_A x mask_B.
    half = inrange.copy()
    half[:64] = wide[:64]
    rep = jaxemu.auto_report(half, inrange.T, AUTO_CW)
    assert rep["blocks"] == {"fp16x3": 2 * 4, "bf16x6": 2 * 4, "fp32": 0}
    # ... and the hybrid runs fp16x3 on the 64 safe rows, bf16x6 on the rest.
    assert rep["scheme"] == "fp16x3+bf16x6" and rep["split"] == dict(rows=64, cols=128, of=(128, 128))
    rep = jaxemu.auto_report(inrange, half.T, AUTO_CW)
    assert rep["scheme"] == "fp16x3+bf16x6" and rep["split"] == dict(rows=128, cols=64, of=(128, 128))
    # 40 safe rows of 128: the largest split point they fill is 32 (a multiple of block).
    few = wide.copy()
    few[np.arange(0, 128, 3)[:40]] = inrange[:40]
    assert jaxemu.auto_report(few, inrange.T, AUTO_CW)["split"] == dict(rows=32, cols=128, of=(128, 128))
    # Both sides mixed (APE's Figure 8 setting): fp16x3 on the safe rows x safe columns.
    rows_ok = np.arange(128) % 4 != 0  # 96 safe rows and columns: the 3/4 split
    a2, b2 = wide.copy(), wide.T.copy()
    a2[rows_ok], b2[:, rows_ok] = inrange[rows_ok], inrange[rows_ok].T
    assert jaxemu.auto_report(a2, b2, AUTO_CW)["split"] == dict(rows=96, cols=96, of=(128, 128))
    # The normwise test takes fp16x3 on all of these but the extreme one
    # (where bf16x6 cannot run and FP32 is the only other choice).
    for x, y in [(wide, inrange.T), (half, inrange.T), (inrange, half.T), (few, inrange.T), (a2, b2)]:
        assert jaxemu.auto_report(x, y, AUTO)["scheme"] == "fp16x3"


def test_componentwise_hybrid_runs_each_row_with_its_scheme(rng):
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
    c = np.asarray(auto_cw_dot(a, b))
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


def test_componentwise_two_sided_hybrid(rng):
    """Safe rows x safe columns run fp16x3, every other entry bf16x6, in place."""
    m, k, n = 128, 96, 128
    a = T.sample("wide-exp", (m, k), rng)
    b = T.sample("wide-exp", (k, n), rng)
    rows = np.sort(rng.permutation(m)[:80])   # 80 safe rows -> split 64 (1/2 of 128)
    cols = np.sort(rng.permutation(n)[:100])  # 100 safe columns -> split 96 (3/4)
    a[rows] = rng.uniform(-1, 1, (80, k))
    b[:, cols] = rng.uniform(-1, 1, (k, 100))
    assert jaxemu.auto_report(a, b, AUTO_CW)["split"] == dict(rows=64, cols=96, of=(m, n))
    c = np.asarray(auto_cw_dot(a, b))
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
    default = jaxemu.get_scheme("auto")  # no cost model for the CPU here: the thresholds decide
    thin = plan(1, 256, 8192, 65536, default)
    assert thin.static == "fp32" and "too thin" in thin.reason    # M = 256: too thin
    assert plan(1, 8192, 8192, 8192, default).static is None      # large: decided by the data
    a = np.ones((256, 8192), np.float32)
    b = np.ones((8192, 512), np.float32)
    rep = jaxemu.auto_report(a, b)
    assert rep["scheme"] == "fp32" and "too small" in rep["reason"]
    ex = jaxemu.explain(lambda a, b: a @ b, a, b, scheme="auto")
    assert "auto runs fp32 here" in ex[0].reason
    small = np.ones((64, 64), np.float32)
    assert "too small" in jaxemu.auto_report(small, small)["reason"]


# Data on which each choice runs (both criteria), for the exactness test.
CHOICES = [("plain", "fp16x3"), ("tiny partners", "bf16x6"), ("both sides tiny", "fp32"),
           ("half the rows wide", "fp16x3+bf16x6"), ("half the columns wide", "fp16x3+bf16x6")]


@pytest.mark.parametrize("criterion", ["normwise", "componentwise"])
def test_auto_computes_exactly_what_it_chooses(criterion):
    """auto's result is, bit for bit, that of its choice: a pure choice
    equals the concrete scheme called directly; a hybrid equals its products
    run through the backend one by one (auto's unshared path), although the
    program splits the operands and applies FP32's special values once for
    all the hybrids (issue 13). NaN/Inf in the operands included."""
    from jaxemu.backends import product_for
    s = AUTO.replace(criterion=criterion)
    run = auto_dot if criterion == "normwise" else auto_cw_dot
    unshared = jax.jit(lambda a, b: auto.auto_dot(a[None], b[None], s, "cpu", product_for("cpu"))[0])
    bits = lambda x: np.asarray(x).view(np.uint32)  # noqa: E731
    for kind, choice in CHOICES:
        a, b = adversarial(kind, np.random.default_rng(0))  # (a seed on which the choices are the listed ones)
        for specials in (False, True):
            if specials:
                a[10:14, 20:24], a[40, 50], b[100:103, 5:8] = np.inf, np.nan, -np.inf
            rep = jaxemu.auto_report(a, b, s)
            assert rep["scheme"] == choice, (kind, rep)
            direct = (jaxemu.matmul(a, b, scheme=choice) if choice != "fp16x3+bf16x6" else unshared(a, b))
            np.testing.assert_array_equal(bits(run(a, b)), bits(direct), err_msg=f"{kind}, specials={specials}")


def test_auto_program_stays_within_a_few_candidates():
    """Issue 13: under auto each product carries its candidates as branches
    of a conditional, and the hybrids' products used to carry their own
    splits and special-value handling (13 candidates, 24 emulated products).
    The lowered program of 4 GEMMs with 8-13 candidates each stays within 8x
    that of fp16x3 plus bf16x6 (old code: 12.4x; now 5.6-5.8x, jax 0.10-0.11)."""
    shapes = [(96 + 32 * i, 128, 64 + 32 * i) for i in range(4)]
    assert [len(auto.plan(1, m, n, k, AUTO).candidates) for m, k, n in shapes] == [8, 12, 13, 13]
    args = [jax.ShapeDtypeStruct(x, jnp.float32) for m, k, n in shapes for x in ((m, k), (k, n))]

    def f(*xs):
        return [x @ y for x, y in zip(xs[::2], xs[1::2])]

    def size(scheme):
        with jax.default_matmul_precision("highest"):
            return len(jax.jit(jaxemu.emulate(f, scheme=scheme)).lower(*args).as_text())
    assert size(AUTO) <= 8 * (size("fp16x3") + size("bf16x6"))


@pytest.mark.parametrize("shape", [(2, 64, 48), (1, 3, 5)])
def test_one_of_returns_the_chosen_branch_in_rows_of_fixed_length(shape):
    """xla.one_of: each branch's C leaves the conditional in rows of
    ONE_OF_ROW values (one layout for every branch), flat where its size is
    not a multiple; the caller gets the chosen branch's C, bit for bit."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    branches = [lambda x: x * 3.0, lambda x: jnp.sin(x), lambda x: x[:, ::-1, :] - 1.0]
    f = jax.jit(lambda i, x: xla.one_of(i, branches, (x,), shape))
    for i, g in enumerate(branches):
        np.testing.assert_array_equal(np.asarray(f(i, x)), np.asarray(g(x)))
    size = int(np.prod(shape))
    inner = f"{size // xla.ONE_OF_ROW}x{xla.ONE_OF_ROW}xf32" if size % xla.ONE_OF_ROW == 0 else f"{size}xf32"
    assert f"tensor<{inner}>" in f.lower(0, x).as_text()  # the conditional's result


def _fake_gated(calls, prod):
    """A GatedProduct on the CPU with the gates' semantics (jnp.where: a
    candidate's C where the choice names it, else the C before it), for
    auto's choice on the device (backends.GatedProduct)."""
    from jaxemu import backends

    def product(a, b, scheme, choice, index, c_in=None, scales=None):
        calls.append(scheme)
        c = prod(a, b, jaxemu.get_scheme(scheme))
        return jnp.where(choice == index, c, jnp.zeros_like(c) if c_in is None else c_in)
    return backends.GatedProduct(lambda scheme, shape: True, product)


DEVICE_CHOICE_KINDS = ["plain", "row magnitudes", "tiny partners", "both sides tiny", "slices rounding up to overflow",
                       "class 2", "nan and inf"]


def _device_choice_data(kind, rng):
    if kind == "class 2":  # values beyond 2^100: FP32 only
        a, b = adversarial("plain", rng)
        a[2, 3], b[5, 1] = 2.0**110, 2.0**-115
    elif kind == "nan and inf":
        a, b = adversarial("plain", rng)
        a[1, 2], b[3, 4] = np.inf, np.nan
    else:
        a, b = adversarial(kind, rng)
    return a, b


def test_the_choice_on_the_devices_data_take_every_pure_candidate(rng):
    """The kinds of the test below make the conditional choose each pure
    candidate, fp16x3, bf16x6 and FP32, and no hybrid (auto_report: the
    conditional's choice)."""
    labels = {auto.auto_report(*_device_choice_data(kind, rng), AUTO, platform="cpu")["scheme"]
              for kind in DEVICE_CHOICE_KINDS}
    assert labels == {"fp16x3", "bf16x6", "fp32"}, labels


@pytest.mark.parametrize("kind", DEVICE_CHOICE_KINDS)
def test_the_choice_on_the_device_gives_the_conditionals_result(kind, monkeypatch, rng):
    """auto's choice on the device (opt-in, JAXEMU_CUDA_DEVICE_CHOICE=1):
    every candidate runs behind a gate that the test's choice opens; with
    gates that behave as the cuda kernels' do, C is the conditional's, bit
    for bit, where the conditional chooses a pure candidate (fp16x3, bf16x6
    or FP32; the kinds here). Off by default; never where fp16x3 is not
    first or past DEVICE_CHOICE_MAX_FLOPS."""
    from jaxemu import backends
    from test_fused_layout import same_bits
    a, b = _device_choice_data(kind, rng)
    prod = backends.xla_product("cpu")
    calls = []
    monkeypatch.setitem(backends._GATED, "cpu", _fake_gated(calls, prod))

    def run():
        jax.clear_caches()
        return np.asarray(jax.jit(lambda a, b: auto.auto_dot(a[None], b[None], AUTO, "cpu", prod, backend="fake"))(
            a, b))[0]
    monkeypatch.delenv("JAXEMU_CUDA_DEVICE_CHOICE", raising=False)
    want = run()
    assert calls == []  # off by default
    monkeypatch.setenv("JAXEMU_CUDA_DEVICE_CHOICE", "1")
    got = run()
    shape = (1, a.shape[0], b.shape[1], a.shape[1])
    pl = auto.plan(*shape, AUTO, "cpu", "fake")
    assert calls == [c.scheme for c in auto.device_choice(pl.candidates, shape, backends._GATED["cpu"])]
    assert calls[0] == "fp16x3" and calls[-1] == "fp32"
    same_bits(got, want)
    if kind == "class 2":  # the FP32 candidate ran: FP32's product
        same_bits(got, np.asarray(fp32_dot(a, b)))
    # auto_report says so (its backend the fake's), and names a pure candidate
    monkeypatch.setattr(auto, "backend_for", lambda scheme, platform=None: "fake")
    rep = auto.auto_report(a, b, AUTO, platform="cpu")
    assert rep["on_device"] and rep["scheme"] in calls
    assert kind != "class 2" or rep["scheme"] == "fp32"
    # Past the bound, or without gated products, the conditional runs.
    assert auto.device_choice(pl.candidates, shape, backends._GATED["cpu"]) is not None
    assert auto.device_choice(pl.candidates, shape, None) is None
    monkeypatch.setattr(auto, "DEVICE_CHOICE_MAX_FLOPS", 1.0)
    assert auto.device_choice(pl.candidates, shape, backends._GATED["cpu"]) is None


def test_the_choice_on_the_device_takes_the_pure_candidates_up_to_fp32():
    """auto.device_choice: the plan's pure candidates in its order, up to
    FP32 (always allowed: none after it is ever chosen), hybrids left out;
    None where fp16x3 is not first, a candidate cannot run gated, or
    without gated products."""
    from jaxemu import backends
    C = auto.Candidate
    shape = (1, 2048, 2048, 2048)
    every = backends.GatedProduct(lambda scheme, shape: True, None)
    plan = (C("fp16x3", 1.0), C("bf16x6", 2.0, True, 1024, 2048), C("fp32", 3.0), C("bf16x6", 4.0))
    assert [c.scheme for c in auto.device_choice(plan, shape, every)] == ["fp16x3", "fp32"]
    plan = (C("fp16x3", 1.0), C("bf16x6", 2.0), C("fp32", 3.0))
    assert [c.scheme for c in auto.device_choice(plan, shape, every)] == ["fp16x3", "bf16x6", "fp32"]
    assert auto.device_choice((C("bf16x6", 0.5, True, 1024, 2048),) + plan, shape, every) is None  # a hybrid first
    assert auto.device_choice(plan[1:], shape, every) is None
    assert auto.device_choice(plan, shape, backends.GatedProduct(lambda s, shape: s != "bf16x6", None)) is None
    assert auto.device_choice(plan, shape, None) is None
    assert auto.device_choice(plan, (8, 8192, 8192, 8192), every) is None  # past DEVICE_CHOICE_MAX_FLOPS
