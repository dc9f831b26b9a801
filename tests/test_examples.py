"""The applications in examples/ reach FP32 accuracy through emulation.

Each example's run() is called at a small size and its accuracy metric is
held to a bound against FP32 or float64; a control with the one-pass "bf16"
scheme shows that the bound is tight enough to tell FP32-class accuracy from
BF16's. Optional extras (scikit-learn, optax) are skipped where missing.
"""
import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NAMES = ["kmeans", "knn", "mlp", "cholesky", "hpl_ai"]


def load(name):
    """Import examples/<name>.py (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"jaxemu_examples_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def ex():
    mods = {}

    def get(name):
        if name not in mods:
            mods[name] = load(name)
        return mods[name]
    return get


@pytest.mark.parametrize("name", NAMES)
def test_help(ex, name, capsys):
    with pytest.raises(SystemExit) as e:
        ex(name).main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--schemes" in out and "usage" in out


# -- k-means -----------------------------------------------------------------

@pytest.fixture(scope="module")
def kmeans_runs(ex):
    km = ex("kmeans")
    data = km.make_data(2048, 16, 8, seed=1, offset=8.0)
    r = km.run(scheme="bf16x6", data=data, max_iter=30, repeats=1)
    ctrl = km.run(scheme="bf16", data=data, max_iter=30, repeats=1, reference=r["_ref"])
    return r, ctrl


def test_kmeans_bf16x6_matches_fp32(kmeans_runs):
    r, ctrl = kmeans_runs
    assert abs(r["inertia_rel"]) <= 1e-7, r  # measured ~1e-13; BF16 ~2e-5
    assert r["label_agreement"] >= 0.99, r
    # The control: one-pass BF16 distances mislabel points on these data.
    assert ctrl["label_agreement"] < 0.99, ctrl


def test_kmeans_matches_sklearn(kmeans_runs):
    pytest.importorskip("sklearn")
    r, _ = kmeans_runs
    assert abs(r["sklearn_inertia_rel"]) <= 1e-7, r
    assert r["sklearn_label_agreement"] >= 0.99, r


# -- kNN ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def knn_data(ex):
    kn = ex("knn")
    data = kn.make_data(4096, 128, 32, seed=1, offset=4.0)
    return data, kn.exact_knn64(*data, 10)


@pytest.mark.parametrize("scheme", ["bf16x6", "fp16x3", "bf16"])
def test_knn_recall(ex, knn_data, scheme):
    data, truth = knn_data
    r = ex("knn").run(k=10, scheme=scheme, data=data, truth=truth, repeats=1)
    # FP32 finds every true neighbour on these data; TF32 misses ~0.5%, BF16 ~5%.
    if scheme == "bf16":  # the control
        assert r["recall"] < 0.99, r
    else:
        assert r["recall"] >= 0.999, r


def test_knn_grouped_top_k_is_lax_top_k(ex):
    # Exact, ties included: integer-valued rows (many equal values, equal
    # group maxima) and a row of one value repeated; the same values and
    # indices as lax.top_k for each group size and k.
    import jax
    import numpy as np
    kn = ex("knn")
    rng = np.random.default_rng(3)
    x = rng.integers(-20, 20, size=(64, 4096)).astype(np.float32)
    x[0] = 7.0
    x[1, ::512] = 100.0  # the largest values spread over many groups
    x = np.concatenate([x, rng.standard_normal((16, 4096)).astype(np.float32)])
    # NaN of both signs, infinities and signed zeros, in lax.top_k's order
    # (a float max over a group would miss them: XLA's CPU reduction skipped a NaN)
    x[2, 100], x[3, ::7], x[5, :] = np.nan, np.nan, -np.inf
    x[4, 5] = -np.abs(np.float32(np.nan))
    x[6, 9], x[6, 10], x[6, 11:] = -0.0, 0.0, -1.0
    x[7, 3000], x[8, 64] = np.inf, -0.0
    x[8, 65:] = -0.0
    for group, k, n in ((64, 10, 4096), (256, 16, 4096), (512, 8, 4096), (128, 1, 4096), (136, 1, 4080)):
        # groups of 128 or more (multiples of SUBGROUP = 32) take their k x
        # group candidates by groups of 32 again: three top_k, not two
        xs = jax.numpy.asarray(x[:, :n])
        tops = str(jax.make_jaxpr(lambda x: kn.top_k_grouped(x, k, group))(xs)).count("top_k")
        assert tops == (3 if group >= 4 * kn.SUBGROUP and group % kn.SUBGROUP == 0 else 2), (group, tops)
        v, i = kn.top_k_grouped(xs, k, group)
        v0, i0 = jax.lax.top_k(xs, k)
        np.testing.assert_array_equal(np.asarray(v), np.asarray(v0))
        np.testing.assert_array_equal(np.asarray(i), np.asarray(i0))
    # integers as they are (their order is lax.top_k's); other dtypes refused
    xi = jax.numpy.asarray(rng.integers(-20, 20, size=(32, 2048)).astype(np.int32))
    for got, want in zip(kn.top_k_grouped(xi, 10, 64), jax.lax.top_k(xi, 10)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(ValueError, match="float16/bfloat16/float32/float64"):
        kn.top_k_grouped(jax.numpy.asarray(x[:, :2048]).astype(jax.numpy.float8_e4m3fn), 10, 64)
    with pytest.raises(ValueError, match="multiple of group"):
        kn.top_k_grouped(jax.numpy.asarray(x[:, :1000]), 10, 64)
    with pytest.raises(ValueError, match="n // group >= k"):
        kn.top_k_grouped(jax.numpy.asarray(x), 10, 1024)


def test_knn_takes_the_grouped_top_k_on_long_rows(ex, knn_data, monkeypatch):
    # With groups of 64 (128) the 4096-point database takes top_k_grouped
    # (64 groups >= 4k; 32 >= 4 x 8): the same neighbours as lax.top_k's
    # search over whole rows (the default GROUP of 1024: 4 groups, too few).
    import jax
    import numpy as np
    kn = ex("knn")
    data, truth = knn_data
    q, db = (jax.numpy.asarray(v) for v in data)
    plain = np.asarray(jax.jit(kn.knn, static_argnums=2)(q, db, 10))
    plain8 = np.asarray(jax.jit(kn.knn, static_argnums=2)(q, db, 8))
    for group, k, tops, want in ((64, 10, 2, plain), (128, 8, 3, plain8)):  # 128: the candidates by groups again
        monkeypatch.setattr(kn, "GROUP", group)
        grouped = lambda q, db: kn.knn(q, db, k)  # a new function: no trace cached with the old GROUP
        jaxpr = str(jax.make_jaxpr(grouped)(q, db))
        assert jaxpr.count("top_k") == tops and "reduce_max" in jaxpr
        np.testing.assert_array_equal(np.asarray(jax.jit(grouped)(q, db)), want)
    assert kn.recall(plain, truth) >= 0.999


# -- MLP ---------------------------------------------------------------------

def test_mlp_training_follows_fp32(ex):
    r = ex("mlp").run(scheme="bf16x6", n=2048, hidden=64, steps=100, batch=128)
    assert r["final_loss"] < 0.5 * r["initial_loss"], r  # it trains
    assert r["final_rel"] <= 0.02, r                      # final loss within 2% of FP32's
    assert r["curve_max_rel"] <= 1e-5, r                  # and the whole curve follows FP32's
    # (measured: bf16x6 ~2e-7, tf32 ~5e-4, bf16 ~6e-3)


def test_mlp_optax(ex):
    pytest.importorskip("optax")
    r = ex("mlp").run(scheme="bf16x6", task="classification", optimizer="adam", n=1024, hidden=32,
                      steps=40, batch=128)
    assert r["final_loss"] < r["initial_loss"], r
    assert r["final_rel"] <= 0.02 and r["curve_max_rel"] <= 1e-5, r


# -- Cholesky ------------------------------------------------------------------

def test_cholesky_backward_error(ex):
    ch = ex("cholesky")
    r = ch.run(n=256, block=64, scheme="bf16x6", repeats=1)
    assert r["backward_error"] <= 3 * r["backward_error_fp32"], r   # FP32-class: about FP32's
    assert r["backward_error"] < 1e-5, r
    ctrl = ch.run(n=256, block=64, scheme="bf16", repeats=1, data=r["_data"], reference=r["_ref"])
    assert not ctrl["backward_error"] < 1e-5, ctrl


# -- HPL-AI --------------------------------------------------------------------

@pytest.fixture(scope="module")
def hpl(ex):
    return ex("hpl_ai")


def test_hpl_ai_bf16x6_classical_ir(hpl):
    # FP32-accurate factors: classical refinement converges in a few steps.
    r = hpl.run(n=256, block=64, scheme="bf16x6", repeats=1, time64=False)
    assert r["ir_converged"] and r["ir_residual"] < 16, r
    assert r["ir_iters"] <= 3, r  # as from FP32 factors (2); BF16/FP16/TF32 factors need 7 or more
    assert r["gmres_converged"] and r["gmres_outer"] <= 2, r
    # The histories record every iterate: the first is the unrefined solve, the last the accepted one.
    assert len(r["ir_history"]) == r["ir_iters"] + 1 and r["ir_history"][-1] == r["ir_residual"]
    assert r["ir_history"][0] == r["initial_residual"] and r["gmres_history"][-1] == (r["gmres_steps"], r["gmres_residual"])


@pytest.mark.parametrize("matrix", ["uniform", "diagdom"])
def test_hpl_ai_native_bf16(hpl, matrix):
    # BF16 factors: GMRES-IR converges on both matrices; classical IR at least
    # on the diagonally dominant one.
    r = hpl.run(n=256, block=64, scheme="bf16", matrix=matrix, repeats=1, time64=False)
    assert r["initial_residual"] > 16, r  # refinement is needed
    assert r["gmres_converged"] and r["gmres_residual"] < 16, r
    assert r["gmres_outer"] <= 3 and r["gmres_steps"] <= 60, r
    if matrix == "diagdom":
        assert r["ir_converged"] and r["ir_iters"] <= 5, r
