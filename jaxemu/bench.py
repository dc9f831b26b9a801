"""``python -m jaxemu.bench``: speed and accuracy of every scheme on both
backends, against cuBLAS SGEMM, TF32 and XLA's multi-pass presets measured in
the same run (DESIGN.md 6).

For each shape and case: median time of repeated runs after warm-up
(``block_until_ready``), TFLOP/s = 2MNK/t, speedup over SGEMM, relative
Frobenius error against the float64 product of the same inputs, and its
ratio to SGEMM's error. Prints a table, writes JSON, and optionally a Pareto
plot (speed against error) and a markdown summary.
"""
from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from typing import Callable, Dict, List, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .testing import median_time

DEFAULT_SCHEMES = "bf16,tf32,bf16x3,bf16x6,bf16x9,tf32x3,fp16x3,fp16x3_bitcut,ozaki2_f32,int8_l1,int8_l4,auto"

# ``--suite shapes``: the shapes applications produce (issue 10), B x M x K x N.
SUITE_SHAPES = {
    "4096^3": "1x4096x4096x4096",
    "8192^3": "1x8192x8192x8192",
    "16384^3": "1x16384x16384x16384",
    "batched 8 x 2048^3": "8x2048x2048x2048",
    "K = 65536": "1x4096x65536x4096",
    "k-means distances (d = 256, 1024 centres)": "1x1048576x256x1024",
    "k-means update (one-hot^T X)": "1x1024x1048576x256",
    "kNN distances (d = 128)": "1x8192x128x262144",
    "MLP layer": "1x32768x1024x4096",
    "2048^3": "1x2048x2048x2048",
}
SUITE_SCHEMES = "bf16x3,bf16x6,bf16x9,tf32x3,fp16x3,fp16x3_bitcut,auto"


def _release():
    """After a failed case: drop compiled programs and garbage so that the
    next case starts from free memory (on an H100, fp16x3 and bf16x6 ran out
    of memory on the kNN shape after ozaki2_f32 had, though they fit alone)."""
    import gc
    jax.clear_caches()
    gc.collect()


def suite_error_rows(shape, laws, schemes: List[str], seed: int) -> List[dict]:
    """Error only (no timing) of SGEMM and the schemes on further input laws."""
    import jaxemu
    from jaxemu import testing as T
    bsz, m, k, n = shape
    rows = []
    for law in laws:
        rng = np.random.default_rng(seed)
        pre = (bsz,) if bsz > 1 else ()
        a = jax.device_put(T.sample(law, pre + (m, k), rng))
        b = jax.device_put(T.sample(law, pre + (k, n), rng))
        with jax.enable_x64(True):
            ref = jnp.matmul(a.astype(jnp.float64), b.astype(jnp.float64), precision=lax.Precision.HIGHEST)
            nref = float(jnp.linalg.norm(ref))
        errs = {}
        for name in ["sgemm"] + schemes:
            f = jax.jit((lambda x, y: jnp.matmul(x, y, precision=lax.Precision.HIGHEST)) if name == "sgemm"
                        else (lambda s: lambda x, y: jaxemu.matmul(x, y, scheme=s))(name))
            try:
                with jax.enable_x64(True):
                    errs[name] = float(jnp.linalg.norm(f(a, b).astype(jnp.float64) - ref) / nref)
            except Exception as ex:  # reported, and the suite goes on (e.g. out of memory)
                if name == "sgemm":
                    raise
                rows.append(dict(case=f"{name}:default", shape=list(shape), law=law, error=None, ms=None,
                                 error_only=True, failed=f"{type(ex).__name__}: {ex}"[:300]))
                print(f"  {law}: {name} FAILED {type(ex).__name__}: {str(ex)[:200]}", flush=True)
                _release()
        for name, e in errs.items():
            rows.append(dict(case=name if name == "sgemm" else f"{name}:default", shape=list(shape), law=law,
                             error=e, error_vs_sgemm=e / errs["sgemm"], ms=None, error_only=True))
        print(f"  {law}: " + ", ".join(f"{k} {v / errs['sgemm']:.2f}" for k, v in errs.items() if k != "sgemm")
              + " (error / SGEMM's)", flush=True)
        del a, b, ref
    return rows


def suite_table(rows: List[dict]) -> str:
    """One line per shape: speedup over SGEMM per scheme (uniform(-1,1)), and
    the largest error / SGEMM's over the laws measured."""
    shapes = list(dict.fromkeys(tuple(r["shape"]) for r in rows))
    cases = list(dict.fromkeys(r["case"] for r in rows if r["case"] not in ("sgemm", "tf32 (jnp default)")))
    names = [c.split(":")[0] for c in cases]
    out = [f"{'shape (B x M x K x N)':24s} {'SGEMM ms':>9s} " + " ".join(f"{n:>15s}" for n in names),
           f"{'':24s} {'':>9s} " + " ".join(f"{'x SGEMM / err':>15s}" for _ in names)]
    for sh in shapes:
        rs = [r for r in rows if tuple(r["shape"]) == sh]
        base = next((r for r in rs if r["case"] == "sgemm" and r.get("ms")), None)
        cells = []
        for c in cases:
            timed = next((r for r in rs if r["case"] == c and r.get("ms")), None)
            worst = max((r["error_vs_sgemm"] for r in rs if r["case"].split(":")[0] == c.split(":")[0]
                         and r.get("error_vs_sgemm") is not None), default=float("nan"))
            sp = timed["speedup_vs_sgemm"] if timed else float("nan")
            cells.append(f"{sp:6.2f}x / {worst:5.2f}")
        out.append(f"{'x'.join(map(str, sh)):24s} {base['ms'] if base else float('nan'):9.2f} " + " ".join(
            f"{c:>15s}" for c in cells))
    return "\n".join(out)


def _presets() -> Dict[str, Callable]:
    P = lax.DotAlgorithmPreset
    out = {}
    for name, preset in [("xla:BF16_X3", "BF16_BF16_F32_X3"), ("xla:BF16_X6", "BF16_BF16_F32_X6"),
                         ("xla:BF16_X9", "BF16_BF16_F32_X9"), ("xla:TF32_X3", "TF32_TF32_F32_X3")]:
        if hasattr(P, preset):
            out[name] = (lambda p: lambda x, y: lax.dot_general(
                x, y, (((x.ndim - 1,), (x.ndim - 2,)), ((tuple(range(x.ndim - 2)),) * 2)),
                precision=p, preferred_element_type=jnp.float32))(getattr(P, preset))
    return out


def time_fn(f, a, b, reps: int, min_rep_s: float = 0.02) -> float:
    """Median seconds per call of f(a, b), each timed rep lasting min_rep_s."""
    return median_time(lambda: f(a, b), reps, min_rep_s)


def device_facts() -> Dict[str, str]:
    d = jax.devices()[0]
    facts = dict(device=d.device_kind, platform=d.platform, jax=jax.__version__,
                 date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
        if out:
            facts["driver"] = out[0].split(",")[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return facts


def run_shape(shape, law: str, schemes: List[str], backends: List[str], reps: int, seed: int,
              baselines: bool = True) -> List[dict]:
    import jaxemu
    from jaxemu.backends import backend_for
    from jaxemu import testing as T
    bsz, m, k, n = shape
    rng = np.random.default_rng(seed)
    pre = (bsz,) if bsz > 1 else ()
    a = jax.device_put(T.sample(law, pre + (m, k), rng))
    b = jax.device_put(T.sample(law, pre + (k, n), rng))
    with jax.enable_x64(True):
        ref = jnp.matmul(a.astype(jnp.float64), b.astype(jnp.float64), precision=lax.Precision.HIGHEST)
        nref = float(jnp.linalg.norm(ref))

    def err(c):
        with jax.enable_x64(True):
            return float(jnp.linalg.norm(c.astype(jnp.float64) - ref) / nref)

    cases: Dict[str, Callable] = {
        "sgemm": lambda x, y: jnp.matmul(x, y, precision=lax.Precision.HIGHEST),
    }
    if baselines:
        cases["tf32 (jnp default)"] = lambda x, y: jnp.matmul(x, y, precision=lax.Precision.DEFAULT)
        if jax.devices()[0].platform != "cpu":
            cases.update(_presets())
    for s in schemes:
        for be in backends:
            if be == "cuda" and backend_for(s) != "cuda":
                continue
            cases[f"{s}:{be}"] = (lambda s, be: lambda x, y: jaxemu.matmul(x, y, scheme=s, backend=be))(s, be)
    rows = []
    flops = 2.0 * bsz * m * n * k
    for name, f in cases.items():
        jf = jax.jit(f)
        try:
            t = time_fn(jf, a, b, reps)
            e = err(jf(a, b))
        except Exception as ex:  # a case that fails is reported, not hidden
            rows.append(dict(case=name, shape=shape, law=law, error=None, ms=None, failed=f"{type(ex).__name__}: {ex}"[:300]))
            print(f"  {name:22s} FAILED {type(ex).__name__}: {str(ex)[:200]}", flush=True)
            _release()
            continue
        rows.append(dict(case=name, shape=list(shape), law=law, ms=t * 1e3, tflops=flops / t / 1e12, error=e))
        print(f"  {name:22s} {t * 1e3:9.3f} ms {flops / t / 1e12:8.1f} TFLOP/s  err {e:.2e}", flush=True)
    base = next(r for r in rows if r["case"] == "sgemm")
    for r in rows:
        if r.get("ms"):
            r["speedup_vs_sgemm"] = base["ms"] / r["ms"]
            r["error_vs_sgemm"] = r["error"] / base["error"]
    return rows


def mixed_operands(n: int, frac16: float, block: int, seed: int, sides: str = "both"):
    """APE's Figure 8 setting: a fraction ``frac16`` of A's and B's 128-wide
    row/column blocks hold data within fp16x3's reach (+-2^U[-8, 0)); the rest
    spread over 2^[-40, 40), which fp16x3 cannot hold (auto must take bf16x6).
    ``sides="rows"``: only A's rows are mixed, B is all in range (the case
    auto's row hybrid serves)."""
    if sides not in ("both", "rows"):
        raise ValueError(f"sides must be 'both' or 'rows', got {sides!r}")
    rng = np.random.default_rng(seed)

    def make(shape, axis, frac):
        x = rng.choice([-1.0, 1.0], shape) * np.exp2(rng.uniform(-8, 0, shape))
        nb = shape[axis] // block
        wide = np.repeat(rng.permutation(nb) >= int(round(frac * nb)), block)[: shape[axis]]
        mask = wide[:, None] if axis == 0 else wide[None, :]
        spread = np.exp2(rng.integers(-40, 40, shape)).astype(np.float64)
        return np.asarray(x * np.where(mask, spread, 1.0), np.float32)

    return make((n, n), 0, frac16), make((n, n), 1, frac16 if sides == "both" else 1.0)


def run_mixed(n: int, fracs, schemes, reps: int, seed: int, sides: str = "both") -> List[dict]:
    import jaxemu
    rows = []
    for frac in fracs:
        a_np, b_np = mixed_operands(n, frac, 128, seed, sides)
        a, b = jax.device_put(a_np), jax.device_put(b_np)
        with jax.enable_x64(True):
            ref = jnp.matmul(a.astype(jnp.float64), b.astype(jnp.float64), precision=lax.Precision.HIGHEST)
            nref = float(jnp.linalg.norm(ref))
        rep = jaxemu.auto_report(a, b)
        for name in ["sgemm"] + list(schemes):
            f = jax.jit((lambda x, y: jnp.matmul(x, y, precision=lax.Precision.HIGHEST)) if name == "sgemm"
                        else (lambda s: lambda x, y: jaxemu.matmul(x, y, scheme=s))(name))
            t = time_fn(f, a, b, reps)
            with jax.enable_x64(True):
                e = float(jnp.linalg.norm(f(a, b).astype(jnp.float64) - ref) / nref)
            rows.append(dict(case=name, shape=[1, n, n, n], law=f"mixed ({sides}) fp16-range fraction {frac}", ms=t * 1e3,
                             tflops=2.0 * n ** 3 / t / 1e12, error=e, auto_plan=dict(scheme=rep["scheme"], split=rep["split"])))
            print(f"  frac={frac:.1f} {name:10s} {t * 1e3:9.3f} ms  err {e:.2e}", flush=True)
        base = next(r for r in rows[-(len(schemes) + 1):] if r["case"] == "sgemm")
        for r in rows[-(len(schemes) + 1):]:
            r["speedup_vs_sgemm"] = base["ms"] / r["ms"]
            r["error_vs_sgemm"] = r["error"] / base["error"]
    return rows


def table(rows: List[dict]) -> str:
    lines = [f"{'shape (B,M,K,N)':22s} {'case':22s} {'ms':>9s} {'TFLOP/s':>8s} {'x SGEMM':>8s} "
             f"{'error':>9s} {'err/SGEMM':>9s}"]
    for r in rows:
        sh = "x".join(str(x) for x in r["shape"])
        if r.get("ms") is None:
            lines.append(f"{sh:22s} {r['case']:22s} FAILED {r.get('failed', '')[:60]}")
            continue
        lines.append(f"{sh:22s} {r['case']:22s} {r['ms']:9.3f} {r['tflops']:8.1f} {r['speedup_vs_sgemm']:8.2f} "
                     f"{r['error']:9.2e} {r['error_vs_sgemm']:9.2f}")
    return "\n".join(lines)


def markdown(rows: List[dict], facts: Dict[str, str]) -> str:
    """Tables of a run, one per shape/law, in the order measured."""
    out = [f"Device: {facts.get('device')} (driver {facts.get('driver', '?')}), jax {facts.get('jax')}, "
           f"{facts.get('date')}. Times: median of repeated runs after warm-up; speedup and error ratio "
           "against cuBLAS SGEMM (`precision=HIGHEST`) in the same run; error: relative Frobenius norm "
           "against the float64 product of the same inputs.", ""]
    groups: Dict[tuple, List[dict]] = {}
    for r in rows:
        groups.setdefault((tuple(r["shape"]), r["law"]), []).append(r)
    for (shape, law), rs in groups.items():
        out += [f"**{'x'.join(map(str, shape))} (B x M x K x N), {law}**", "",
                "| case | ms | TFLOP/s | x SGEMM | error | error / SGEMM's |", "|---|---|---|---|---|---|"]
        for r in rs:
            if r.get("ms") is None:
                out.append(f"| {r['case']} | failed: {r.get('failed', '')[:80]} | | | | |")
            else:
                out.append(f"| {r['case']} | {r['ms']:.3f} | {r['tflops']:.1f} | {r['speedup_vs_sgemm']:.2f} | "
                           f"{r['error']:.2e} | {r['error_vs_sgemm']:.2f} |")
        out.append("")
    return "\n".join(out)


def pareto_plot(rows: List[dict], shape, path: str, title: str) -> Optional[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: no plot"
    pts = [r for r in rows if r.get("ms") and list(r["shape"]) == list(shape)]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for r in pts:
        c = "tab:red" if r["case"].endswith(":cuda") else "tab:blue" if r["case"].endswith(":xla") else "black"
        ax.scatter(r["error"], r["tflops"], color=c, s=30)
        ax.annotate(r["case"], (r["error"], r["tflops"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    base = next((r for r in pts if r["case"] == "sgemm"), None)
    if base:
        ax.axvline(base["error"], color="gray", ls="--", lw=0.8)
        ax.axhline(base["tflops"], color="gray", ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("relative error vs float64 (lower is better)")
    ax.set_ylabel("TFLOP/s (FP32-equivalent, 2MNK/t)")
    ax.set_title(title, fontsize=9)
    ax.text(0.01, 0.01, "black: baselines, blue: xla backend, red: cuda backend", transform=ax.transAxes, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m jaxemu.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="1x4096x4096x4096,1x8192x8192x8192",
                   help="comma-separated BxMxKxN (default: 4096^3 and 8192^3)")
    p.add_argument("--suite", default=None, choices=["shapes"],
                   help="shapes: the application shapes of SUITE_SHAPES, the multi-slice schemes on the "
                        "default backend, timed on --law; error ratios on every input law")
    p.add_argument("--error-laws", default="uniform(0,1);normal(0,1);wide-exp",
                   help="with --suite: further laws (';'-separated) for the error columns")
    p.add_argument("--schemes", default=DEFAULT_SCHEMES)
    p.add_argument("--backends", default="xla,cuda")
    p.add_argument("--law", default="uniform(-1,1)")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default="bench.json")
    p.add_argument("--md", default=None, help="write the tables as markdown to this file")
    p.add_argument("--plot", default=None, help="PNG path for the Pareto plot of --plot-shape")
    p.add_argument("--plot-shape", default="1x8192x8192x8192")
    p.add_argument("--no-baselines", action="store_true")
    p.add_argument("--mixed", default="", help="fractions of fp16-range blocks for the auto test, e.g. 0,0.3,0.6,1")
    p.add_argument("--mixed-n", type=int, default=8192)
    p.add_argument("--mixed-schemes", default="auto,bf16x6,fp16x3")
    p.add_argument("--mixed-sides", default="both", choices=["both", "rows"],
                   help="mix A's rows and B's columns (APE Fig. 8), or A's rows only (auto's row hybrid)")
    p.add_argument("--from-json", default=None, metavar="PATH",
                   help="measure nothing: print the tables and draw --plot / --md from an earlier run's --json "
                        "(a device run whose plot did not come back)")
    args = p.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        return report(saved["rows"], saved["facts"], args)
    if args.suite == "shapes":
        if args.shapes == p.get_default("shapes"):
            args.shapes = ",".join(SUITE_SHAPES.values())
        if args.schemes == p.get_default("schemes"):
            args.schemes = SUITE_SCHEMES
        args.backends = "default"
    facts = device_facts()
    print(" | ".join(f"{k}: {v}" for k, v in facts.items()), flush=True)
    rows = []
    for spec in filter(None, args.shapes.split(",")):  # --shapes "": only the mixed-range runs
        shape = tuple(int(x) for x in spec.split("x"))
        print(f"shape {spec} ({args.law})", flush=True)
        rows += run_shape(shape, args.law, args.schemes.split(","), args.backends.split(","), args.reps,
                          args.seed, baselines=not args.no_baselines and not args.suite)
        if args.suite:
            rows += suite_error_rows(shape, list(filter(None, args.error_laws.split(";"))),
                                     args.schemes.split(","), args.seed)
    if args.mixed:
        print(f"mixed-range inputs, n={args.mixed_n}", flush=True)
        rows += run_mixed(args.mixed_n, [float(x) for x in args.mixed.split(",")], args.mixed_schemes.split(","),
                          args.reps, args.seed, args.mixed_sides)
    with open(args.json, "w") as f:
        json.dump(dict(facts=facts, rows=rows), f, indent=1)
    return report(rows, facts, args)


def report(rows: List[dict], facts: dict, args) -> int:
    """The markdown, the Pareto plot and the printed tables of a run."""
    if args.md:
        with open(args.md, "w") as f:
            f.write(markdown([r for r in rows if not r.get("error_only")], facts))
            if args.suite:
                f.write("\n```\n" + suite_table(rows) + "\n```\n")
    if args.plot:
        shape = [int(x) for x in args.plot_shape.split("x")]
        law = next((r["law"] for r in rows if r.get("law")), args.law)
        note = pareto_plot(rows, shape, args.plot,
                           f"{facts['device']}, jax {facts['jax']}, {'x'.join(map(str, shape))}, {law}")
        if note:
            print(note)
    print()
    print(table([r for r in rows if not r.get("error_only")]))
    if args.suite:
        print()
        print(suite_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
