"""python -m jaxemu.apps (the applications end to end) in its --small mode on the CPU.

One run of the runner over every application with fp32 and two FP32-class
emulated configurations; each application's quality metric is held to a
bound against its float64 run, and the JSON / markdown outputs and argument
errors are checked.
"""
import json

import pytest

from jaxemu import apps

CONFIGS = ["fp32", "bf16x6", "fp16x3"]
EMULATED = ["bf16x6", "fp16x3"]


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    d = tmp_path_factory.mktemp("apps")
    res = apps.main(["--small", "--configs", ",".join(CONFIGS), "--json", str(d / "apps.json"),
                     "--md", str(d / "apps.md")])
    return res, d


def rows(result, app):
    out = {r["config"]: r for r in result[0]["rows"] if r["app"] == app}
    assert list(out) == CONFIGS, out
    for r in out.values():
        assert "error" not in r and "skipped" not in r, r
    return out


def test_json_schema(result):
    res, d = result
    with open(d / "apps.json") as fh:
        saved = json.load(fh)
    assert saved["small"] is True and saved["configs"] == CONFIGS
    assert set(saved["facts"]) == {"device", "jax", "jaxemu_commit"} and saved["facts"]["jaxemu_commit"]
    assert list(saved["apps"]) == apps.APPS
    assert len(saved["rows"]) == len(apps.APPS) * len(CONFIGS)
    for r in saved["rows"]:
        assert {"app", "config", "size", "time_s", "x_fp32", "metric", "quality", "wall_s"} <= set(r), r
        assert r["time_s"] > 0 and r["metric"] in r["quality"], r
        fp32 = next(s for s in saved["rows"] if s["app"] == r["app"] and s["config"] == "fp32")
        assert r["x_fp32"] == pytest.approx(fp32["time_s"] / r["time_s"], rel=1e-12)
    md = (d / "apps.md").read_text()
    assert md.count("| config | time | x FP32 | quality |") == len(apps.APPS)
    assert "| bf16x6 |" in md


def test_kmeans_inertia(result):
    r = rows(result, "kmeans")
    for c in CONFIGS:
        # 20 Lloyd iterations in float32 from the float64 run's start: same
        # labels, inertia equal to float64's up to rounding (measured ~1e-13;
        # bf16x3, not FP32-class, is 9e-7 off).
        assert abs(r[c]["quality"]["inertia_rel64"]) <= 1e-9, r[c]
        assert r[c]["quality"]["labels_equal64"] == 1.0, r[c]


def test_knn_recall(result):
    r = rows(result, "knn")
    for c in CONFIGS:
        # Well-separated neighbours: FP32-class distances find exactly float64's.
        assert r[c]["quality"]["recall"] == 1.0, r[c]


def test_mlp_loss(result):
    r = rows(result, "mlp")
    e32 = r["fp32"]["quality"]["final_rel64"]
    for c in CONFIGS:
        q = r[c]["quality"]
        assert q["final_loss"] < 0.5 * q["initial_loss"], q          # it trains
        assert len(q["curve"]) == apps.SIZES["small"]["mlp"]["steps"]
        # Final loss within 1e-5 of float64's after 100 adam steps (fp32 itself
        # drifts ~4e-6), and no further from it than twice fp32's drift.
        assert q["final_rel64"] <= 1e-5, q["final_rel64"]
    for c in EMULATED:
        assert r[c]["quality"]["final_rel64"] <= 2 * e32 + 1e-7, (c, r[c]["quality"]["final_rel64"], e32)


def test_cholesky_backward_error(result):
    r = rows(result, "cholesky")
    e32 = r["fp32"]["quality"]["backward_error"]
    assert e32 < 1e-6, e32  # FP32 factorization: a few units of float32 roundoff
    for c in EMULATED:
        assert r[c]["quality"]["backward_error"] <= 3 * e32, (c, r[c]["quality"], e32)


def test_hpl_ai_accepted(result):
    r = rows(result, "hpl_ai")
    for c in CONFIGS:
        q = r[c]["quality"]
        # HPL's acceptance test after refinement from FP32-accurate factors, in
        # as few corrections as from FP32's (2 measured).
        assert q["accepted"] and q["scaled_residual"] < 16, q
        assert q["ir_iters"] <= 3 and q["ir_residual"] < 16, q
        assert q["gmres_ir_iters"] <= 2 and q["gmres_ir_residual"] < 16, q
        assert r[c]["time_s"] == q["factor_s"] + q[f"{q['method']}_s"], q


@pytest.mark.parametrize("argv, message", [
    (["--apps", "kmeans,lu"], "unknown app lu; choose from kmeans,knn,mlp,cholesky,hpl_ai"),
    (["--configs", "fp32,bf16x9"], "unknown config bf16x9; choose from fp32,tf32,bf16x6,fp16x3,auto,bf16x3"),
    (["--apps", ""], "unknown app (none given)"),
    (["--budget", "0"], "--budget must be positive"),
    (["--small", "--full"], "not allowed with argument"),
])
def test_argument_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        apps.main(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_budget_skips_visibly(capsys):
    # A budget used up before the first application: every row is skipped, and says so.
    res = apps.main(["--small", "--apps", "cholesky", "--configs", "fp32", "--budget", "1e-9"])
    assert res["rows"] == [dict(app="cholesky", config="fp32", skipped="time budget")]
    assert "SKIPPED, time budget of 1e-09 s used up" in capsys.readouterr().out
