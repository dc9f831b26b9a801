"""``python -m jaxemu.apps``: the applications of examples/, end to end, per configuration.

Each application is run exactly as a user would write it: the plain-JAX
function f from examples/ under ``jax.jit``, with these configurations:

  fp32    jax.jit(f) under jax.default_matmul_precision("highest") (SGEMM)
  tf32    jax.jit(f) at JAX's default precision (TF32 on NVIDIA GPUs)
  bf16x6, fp16x3, bf16x3
          jax.jit(jaxemu.emulate(f, scheme=s))
  auto    jax.jit(jaxemu.emulate(f, scheme="auto")) under "highest"

Every row reports the median time of a few runs after a warm-up (each run
waits with block_until_ready), the speed against the fp32 row ("x FP32",
> 1 is faster) and the application's quality metric, taken against a
float64 run of the same computation (jax.enable_x64 only around it):

  kmeans   inertia of 20 Lloyd iterations from the same initial centres,
           relative to the float64 run's (and to fp32's)
  knn      recall@10 against the float64 exact neighbours
  mlp      final training loss (optax adam, same batches) relative to float64's
  cholesky backward error ||A - L L^T||_F / ||A||_F, in float64
  hpl_ai   HPL scaled residual after LU in the configuration and float64
           refinement on the device (classical IR and GMRES-IR); accepted below
           16; the time is the time to solution (factorization + the faster
           accepted refinement)

    python -m jaxemu.apps                       # GPU sizes on a GPU, --small otherwise
    python -m jaxemu.apps --small --apps kmeans,knn --configs fp32,bf16x6
    python -m jaxemu.apps --json apps.json --md apps.md --plot apps.png

The applications' code lives in the repository's examples/ (imported as the
package ``examples``), so this module needs a source checkout.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List, Optional

import jax
import jax.numpy as jnp
import numpy as np

APPS = ["kmeans", "knn", "mlp", "cholesky", "hpl_ai"]
CONFIGS = ["fp32", "tf32", "bf16x6", "fp16x3", "auto", "bf16x3"]
EMULATED = {"bf16x6", "fp16x3", "auto", "bf16x3"}

# Problem sizes. "full": the GPU sizes of docs/applications.md; "small": the
# same computations at a size that runs in well under two minutes on 2 CPU cores.
SIZES = {
    "full": dict(
        kmeans=dict(n=1 << 20, d=256, k=1024, iters=20),
        knn=dict(n=1 << 20, m=8192, d=128, k=10, chunk=2048),
        mlp=dict(n=1 << 16, d_in=1024, hidden=4096, steps=50, batch=4096, lr=1e-3),
        cholesky=dict(n=16384, block=1024, cond=1e3),
        hpl_ai=dict(n=16384, block=1024),
    ),
    "small": dict(
        kmeans=dict(n=8192, d=32, k=16, iters=20),
        knn=dict(n=16384, m=256, d=64, k=10, chunk=128),
        mlp=dict(n=4096, d_in=16, hidden=128, steps=100, batch=256, lr=3e-3),
        cholesky=dict(n=512, block=128, cond=1e3),
        hpl_ai=dict(n=512, block=128),
    ),
}
REPEATS = 3


def _examples():
    """The examples/ modules, from the source checkout this package sits in."""
    root = Path(__file__).resolve().parent.parent
    if not (root / "examples" / "kmeans.py").is_file():
        raise RuntimeError(f"jaxemu.apps runs the applications of the repository's examples/, "
                           f"not found next to the package ({root / 'examples'}); run it from a source checkout")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from examples import cholesky, hpl_ai, kmeans, knn, mlp
    return dict(kmeans=kmeans, knn=knn, mlp=mlp, cholesky=cholesky, hpl_ai=hpl_ai)


# -- the configurations -----------------------------------------------------

def build(f: Callable, config: str, static_argnums=()) -> Callable:
    """f as the configuration runs it: jitted, emulated or not, under the
    matmul precision the configuration asks for (which must be in effect when
    the call traces, hence the context around every call)."""
    import jaxemu
    g = jax.jit(jaxemu.emulate(f, scheme=config) if config in EMULATED else f,
                static_argnums=static_argnums)
    highest = config in ("fp32", "auto")

    def call(*args):
        with jax.default_matmul_precision("highest") if highest else contextlib.nullcontext():
            return g(*args)
    return call


def median_time(fn: Callable, repeats: int) -> float:
    """Median seconds per call over `repeats` runs after one warm-up call; a
    run repeats calls shorter than 50 ms back to back (the small problems'
    times are otherwise mostly dispatch and scheduling noise)."""
    from jaxemu.testing import median_time as mt
    return mt(fn, repeats, min_rep_s=0.05)


def _x64(f: Callable, *args):
    """f(*args) with float64 enabled only for this call; results come back as numpy."""
    with jax.enable_x64(True):
        out = f(*args)
        return jax.tree_util.tree_map(np.asarray, out)


# -- the applications: each returns {"run": config -> row dict}, set up once ----

def app_kmeans(ex, p):
    km = ex["kmeans"]
    x, c0 = km.make_data(p["n"], p["d"], p["k"], seed=0, offset=8.0)
    iters = p["iters"]

    xj, c0j = jnp.asarray(x), jnp.asarray(c0)
    # The points go in as an argument (a captured 1 GiB array would become a
    # constant of the compiled program); float64 only inside.
    sq64 = jax.jit(lambda x, c, labels: jnp.sum((x.astype(jnp.float64) - c.astype(jnp.float64)[labels]) ** 2))

    def inertia64(c, labels):
        return float(_x64(sq64, xj, c, labels))

    # The float64 reference: the same iterations from the same centres.
    c64, l64 = _x64(jax.jit(lambda x, c: km.lloyd(x.astype(jnp.float64), c.astype(jnp.float64), iters)),
                    xj, c0j)
    ref = inertia64(c64, l64)
    state = {}

    def run(config):
        f = build(km.lloyd, config, static_argnums=2)
        c, labels = f(xj, c0j, iters)
        inertia = inertia64(c, labels)
        if config == "fp32":
            state["fp32"] = (inertia, np.asarray(labels))
        q = dict(inertia=inertia, inertia64=ref, inertia_rel64=inertia / ref - 1.0,
                 labels_equal64=float(np.mean(np.asarray(labels) == l64)))
        if "fp32" in state:
            q["inertia_rel_fp32"] = inertia / state["fp32"][0] - 1.0
        return dict(time_s=median_time(lambda: f(xj, c0j, iters), REPEATS), metric="inertia_rel64",
                    quality=q)
    return run, f"kmeans n={p['n']} d={p['d']} k={p['k']}, {iters} Lloyd iterations"


def app_knn(ex, p):
    kn = ex["knn"]
    q, db = kn.make_data(p["n"], p["m"], p["d"], seed=0, offset=4.0)
    k, chunk = p["k"], p["chunk"]
    truth = kn.exact_knn64(q, db, k, chunk=chunk)  # on the device, float64, chunked
    qj, dbj = jnp.asarray(q), jnp.asarray(db)

    def run(config):
        f = build(kn.knn_chunked, config, static_argnums=(2, 3))
        found = np.asarray(f(qj, dbj, k, chunk))
        return dict(time_s=median_time(lambda: f(qj, dbj, k, chunk), REPEATS), metric="recall",
                    quality=dict(recall=kn.recall(found, truth)))
    return run, f"knn {p['m']} queries x {p['n']} points x {p['d']}, k={k}"


def app_mlp(ex, p):
    ml = ex["mlp"]
    x, y, d_out = ml.make_data(p["n"], p["d_in"], "regression", seed=0)
    idx = np.random.default_rng(1).integers(0, p["n"], (p["steps"], p["batch"]))
    xs, ys = x[idx], y[idx]  # every batch up front: the same batches for every configuration
    params = ml.init_params(jax.random.PRNGKey(0), [p["d_in"], p["hidden"], p["hidden"], d_out])
    fit = ml.make_fit("regression", p["lr"], "adam")

    def ref_fit(params, xs, ys):
        return jax.jit(fit)(jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params),
                            jnp.asarray(xs, jnp.float64), jnp.asarray(ys, jnp.float64))[1]
    curve64 = _x64(ref_fit, [tuple(map(np.asarray, w)) for w in params], xs, ys)
    xsj, ysj = jnp.asarray(xs), jnp.asarray(ys)
    state = {}

    def run(config):
        f = build(fit, config)
        curve = np.asarray(f(params, xsj, ysj)[1], np.float64)
        if config == "fp32":
            state["fp32"] = curve
        qd = dict(final_loss=float(curve[-1]), final_loss64=float(curve64[-1]),
                  final_rel64=float(abs(curve[-1] / curve64[-1] - 1.0)),
                  curve_max_rel64=float(np.max(np.abs(curve / curve64 - 1.0))),
                  initial_loss=float(curve[0]), curve=[float(v) for v in curve])
        if "fp32" in state:
            qd["final_rel_fp32"] = float(abs(curve[-1] / state["fp32"][-1] - 1.0))
        return dict(time_s=median_time(lambda: f(params, xsj, ysj), REPEATS), metric="final_rel64",
                    quality=qd)
    return run, (f"mlp {p['d_in']}-{p['hidden']}-{p['hidden']}-1, adam, {p['steps']} steps "
                 f"of batch {p['batch']}")


def _spd(n, cond, seed=0):
    """A = G G^T / n + delta I on the device (float32, symmetric): the Wishart
    eigenvalues fill (0, ~4), so delta = 4 / cond gives a condition number
    about `cond`. No O(n^3) host work (a QR at n = 16384 takes minutes)."""
    g = jax.random.normal(jax.random.PRNGKey(seed), (n, n), jnp.float32)
    a = jnp.matmul(g, g.T, precision=jax.lax.Precision.HIGHEST) / n
    a = (a + a.T) / 2 + (4.0 / cond) * jnp.eye(n, dtype=jnp.float32)
    return jax.block_until_ready(a)


def app_cholesky(ex, p):
    ch = ex["cholesky"]
    n, block = p["n"], p["block"]
    a = _spd(n, p["cond"])

    def be(a, l):
        a, l = a.astype(jnp.float64), l.astype(jnp.float64)
        return jnp.linalg.norm(a - l @ l.T) / jnp.linalg.norm(a)
    be = jax.jit(be)

    def backward_error(l):
        return float(_x64(be, a, l))

    # The float64 factor, rounded to float32: the best a float32 L can do.
    with jax.enable_x64(True):
        l64 = jax.jit(lambda a: jnp.linalg.cholesky(a.astype(jnp.float64)).astype(jnp.float32))(a)
    ref = backward_error(l64)
    del l64
    state = {}

    def run(config):
        f = build(ch.cholesky, config, static_argnums=1)
        err = backward_error(f(a, block))
        if config == "fp32":
            state["fp32"] = err
        qd = dict(backward_error=err, backward_error_f64_rounded=ref)
        if "fp32" in state:
            qd["ratio_fp32"] = err / state["fp32"]
        return dict(time_s=median_time(lambda: f(a, block), REPEATS), metric="backward_error", quality=qd)
    return run, f"cholesky n={n} block {block}, cond {p['cond']:g}"


def app_hpl_ai(ex, p):
    hp = ex["hpl_ai"]
    n, block = p["n"], p["block"]
    ka, kb = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.uniform(ka, (n, n), jnp.float32, -0.5, 0.5)   # HPL's generator's law
    b = jax.random.uniform(kb, (n,), jnp.float32, -0.5, 0.5)
    with jax.enable_x64(True):  # A and b in float64 on the device, once, outside the timed solves
        a64, b64 = jax.block_until_ready((a.astype(jnp.float64), b.astype(jnp.float64)))
        methods = dict(ir=jax.jit(hp.refine), gmres_ir=jax.jit(hp.gmres_refine))

    def solve(method, lu, perm):
        """Float64 refinement on the device from the configuration's factors."""
        with jax.enable_x64(True):
            x, it, res = methods[method](a64, b64, lu, perm)
            return jax.block_until_ready(x), int(it), float(res)

    def run(config):
        f = build(hp.lu_factor, config, static_argnums=1)
        lu, perm = f(a, block)
        q = dict(factor_s=median_time(lambda: f(a, block), REPEATS))
        for m in methods:
            _, it, res = solve(m, lu, perm)
            q.update({f"{m}_iters": it, f"{m}_residual": res,
                      f"{m}_s": median_time(lambda: solve(m, lu, perm)[0], REPEATS)})
        # Time to solution: the factorization and the faster refinement that is accepted.
        done = [m for m in methods if q[f"{m}_residual"] < 16]
        best = min(done, key=lambda m: q[f"{m}_s"]) if done else "ir"
        q.update(scaled_residual=q[f"{best}_residual"], accepted=bool(done), method=best)
        return dict(time_s=q["factor_s"] + q[f"{best}_s"], metric="scaled_residual", quality=q)
    return run, f"hpl_ai n={n} block {block}, uniform(-0.5, 0.5); LU + float64 IR / GMRES-IR"


APP_FUNCS = dict(kmeans=app_kmeans, knn=app_knn, mlp=app_mlp, cholesky=app_cholesky, hpl_ai=app_hpl_ai)


# -- facts, output ------------------------------------------------------------

def jaxemu_commit() -> str:
    """$JAXEMU_COMMIT when set, else git rev-parse HEAD of the checkout, else 'unknown'.

    The variable comes first: a copied working tree (the GPU machine's) may
    carry a stale .git whose HEAD is not the code that runs.
    """
    if os.environ.get("JAXEMU_COMMIT"):
        return os.environ["JAXEMU_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def _fmt_metric(row) -> str:
    if "error" in row:
        return f"FAILED: {row['error'][:60]}"
    if row.get("skipped"):
        return f"skipped ({row['skipped']})"
    v = row["quality"][row["metric"]]
    extra = ""
    if row["app"] == "hpl_ai":
        q = row["quality"]
        extra = (f" (IR {q['ir_iters']}, GMRES-IR {q['gmres_ir_iters']} steps"
                 f"{'' if q['accepted'] else ', NOT accepted'})")
    return f"{row['metric']}={v:.3g}{extra}"


def table(rows: List[dict]) -> str:
    lines = [f"{'app':<10}{'config':<9}{'time':>11}{'x FP32':>8}  quality"]
    for r in rows:
        t = f"{r['time_s'] * 1e3:.1f}ms" if "time_s" in r else "-"
        x = f"{r['x_fp32']:.2f}" if r.get("x_fp32") else "-"
        lines.append(f"{r['app']:<10}{r['config']:<9}{t:>11}{x:>8}  {_fmt_metric(r)}")
    return "\n".join(lines)


def markdown(result: dict) -> str:
    f = result["facts"]
    out = [f"Device {f['device']}, jax {f['jax']}, jaxemu {f['jaxemu_commit']}, "
           f"{'--small' if result['small'] else 'full'} sizes; `python -m jaxemu.apps`.", ""]
    for app, desc in result["apps"].items():
        out += [f"**{desc}**", "", "| config | time | x FP32 | quality |", "|---|---|---|---|"]
        for r in result["rows"]:
            if r["app"] == app:
                t = f"{r['time_s'] * 1e3:.1f} ms" if "time_s" in r else "-"
                x = f"{r['x_fp32']:.2f}" if r.get("x_fp32") else "-"
                out.append(f"| {r['config']} | {t} | {x} | {_fmt_metric(r)} |")
        out.append("")
    return "\n".join(out)


def plot(result: dict, path: str) -> Optional[str]:
    """Per application: x FP32 per configuration, the quality metric written on each bar."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"--plot {path}: skipped, matplotlib is not installed (pip install matplotlib)")
        return None
    apps = list(result["apps"])
    fig, axes = plt.subplots(1, len(apps), figsize=(3.6 * len(apps), 3.8), squeeze=False)
    for ax, app in zip(axes[0], apps):
        rows = [r for r in result["rows"] if r["app"] == app and r.get("x_fp32")]
        ax.bar([r["config"] for r in rows], [r["x_fp32"] for r in rows], color="C0")
        for i, r in enumerate(rows):
            ax.text(i, r["x_fp32"], f"{r['quality'][r['metric']]:.2g}", ha="center", va="bottom", fontsize=7)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_title(f"{app} ({rows[0]['metric'] if rows else '-'})", fontsize=9)
        ax.tick_params(axis="x", labelrotation=45, labelsize=8)
    axes[0][0].set_ylabel("speed x FP32 (label: quality)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")
    return path


def save(args, facts, small, descs, configs, rows, t_start) -> dict:
    """The result dict; written to --json / --md when asked."""
    result = dict(facts=facts, small=small, budget_s=args.budget, elapsed_s=time.perf_counter() - t_start,
                  apps=dict(descs), configs=configs, rows=rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    if args.md:
        with open(args.md, "w") as fh:
            fh.write(markdown(result))
    return result


def _names(text: str, valid: List[str], what: str, parser) -> List[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in valid]
    if bad or not names:
        parser.error(f"unknown {what} {', '.join(bad) or '(none given)'}; choose from {','.join(valid)}")
    return names


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m jaxemu.apps", description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--small", action="store_true", default=None,
                      help="CPU-sized problems (the default when no GPU is present)")
    size.add_argument("--full", dest="small", action="store_false", help="GPU-sized problems on any device")
    p.add_argument("--apps", default=",".join(APPS), help=f"comma list (default {','.join(APPS)})")
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"comma list (default {','.join(CONFIGS)})")
    p.add_argument("--budget", type=float, default=420.0,
                   help="total seconds; configurations still to run after it are skipped (default 420)")
    p.add_argument("--json", default=None, help="write all rows and facts as JSON here")
    p.add_argument("--md", default=None, help="write a markdown table here (docs/applications.md)")
    p.add_argument("--plot", default=None, help="PNG: x FP32 and quality per app (needs matplotlib)")
    args = p.parse_args(argv)
    apps = _names(args.apps, APPS, "app", p)
    configs = _names(args.configs, CONFIGS, "config", p)
    if args.budget <= 0:
        p.error(f"--budget must be positive, got {args.budget}")
    small = args.small if args.small is not None else jax.default_backend() != "gpu"
    sizes = SIZES["small" if small else "full"]

    t_start = time.perf_counter()
    dev = jax.devices()[0]
    facts = dict(device=f"{dev.device_kind} ({dev.platform})", jax=jax.__version__,
                 jaxemu_commit=jaxemu_commit())
    print(f"device: {facts['device']} | jax {facts['jax']} | jaxemu {facts['jaxemu_commit']} | "
          f"{'small' if small else 'full'} sizes | budget {args.budget:g} s", flush=True)
    ex = _examples()
    rows, descs = [], {}
    for i, app in enumerate(apps):
        # Each application gets an equal share of what is left of the budget, so
        # that a slow one cannot starve those after it (their fp32 rows at least).
        app_deadline = t_start + args.budget - (args.budget - (time.perf_counter() - t_start)) * (
            1 - 1 / (len(apps) - i))
        if time.perf_counter() - t_start > args.budget:
            print(f"{app}: SKIPPED, time budget of {args.budget:g} s used up", flush=True)
            descs[app] = app
            rows += [dict(app=app, config=c, skipped="time budget") for c in configs]
            continue
        try:
            run, descs[app] = APP_FUNCS[app](ex, sizes[app])
        except Exception as e:  # one application's failure must not stop the others
            print(f"{app}: setup FAILED {type(e).__name__}: {e}", flush=True)
            descs[app] = app
            rows += [dict(app=app, config=c, error=f"setup: {type(e).__name__}: {e}") for c in configs]
            continue
        print(f"== {descs[app]}  (setup with float64 reference {time.perf_counter() - t_start:.0f} s "
              f"into the run)", flush=True)
        t_fp32 = None
        for config in configs:
            row = dict(app=app, config=config, size=sizes[app])
            if time.perf_counter() - t_start > args.budget:
                row["skipped"] = "time budget"
                print(f"  {config}: SKIPPED, time budget of {args.budget:g} s used up", flush=True)
                rows.append(row)
                continue
            if time.perf_counter() > app_deadline and config != "fp32":
                row["skipped"] = "app's share of the time budget"
                print(f"  {config}: SKIPPED, {app} used its share of the {args.budget:g} s budget", flush=True)
                rows.append(row)
                continue
            t0 = time.perf_counter()
            try:
                row.update(run(config))
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {e}"
            row["wall_s"] = time.perf_counter() - t0
            if config == "fp32" and "time_s" in row:
                t_fp32 = row["time_s"]
            if t_fp32 and "time_s" in row:
                row["x_fp32"] = t_fp32 / row["time_s"]
            rows.append(row)
            print(f"  {config:<8} {table([row]).splitlines()[1][19:]}", flush=True)
            # Written after every row: a run killed by an outer time limit keeps what it measured.
            result = save(args, facts, small, descs, configs, rows, t_start)
        run = None  # drop this application's device arrays before the next one's setup
    result = save(args, facts, small, descs, configs, rows, t_start)
    if args.plot:
        plot(result, args.plot)
    print()
    print(table(rows))
    print(f"total {result['elapsed_s']:.0f} s; x FP32 > 1: faster than the fp32 row")
    return result


if __name__ == "__main__":
    main()
