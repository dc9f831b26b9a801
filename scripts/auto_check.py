"""GPU check of auto's data test (docs/auto.md), in one command:

    python scripts/auto_check.py [--n 8192] [--shapes] [--out auto_check.json]

1. At n^3 (default 8192^3) per input law: auto's choice and its test's
   statistics, the time and error (against float64) of SGEMM, fp16x3,
   bf16x6 and auto, the time of the data test alone, and auto's overhead
   over the scheme it chose. Expected (issue 13): fp16x3 (or a hybrid) on
   uniform, normal and wide-exponent data, error <= SGEMM's, overhead <= 3 %.
2. --shapes: on the benchmark's shapes (square 1024..16384, K = 256,
   M = 256, 8 x 2048^3, odd sizes), uniform(-1, 1) data: auto against the
   fastest of SGEMM and the schemes its test allows there; expected at most
   5 % slower.

Prints a table and PASS/FAIL per expectation; exits 1 on a FAIL. Times:
medians of timed runs after warm-up (jaxemu.testing.median_time).
"""
from __future__ import annotations

import argparse
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jaxemu
from jaxemu import auto
from jaxemu import testing as T

LAWS = ("uniform(-1,1)", "normal(0,1)", "wide-exp", "uniform(0,1)")
SHAPES = [(1, 1024, 1024, 1024), (1, 2048, 2048, 2048), (1, 4096, 4096, 4096), (1, 8192, 8192, 8192),
          (1, 16384, 16384, 16384), (1, 8192, 256, 8192), (1, 256, 8192, 8192), (8, 2048, 2048, 2048),
          (1, 3000, 5000, 7000)]  # (B, M, K, N)


def fns():
    sgemm = jax.jit(lambda a, b: jnp.matmul(a, b, precision=lax.Precision.HIGHEST))
    out = {"sgemm": sgemm}
    for s in ("fp16x3", "bf16x6", "auto"):
        out[s] = jax.jit(lambda a, b, s=s: jaxemu.matmul(a, b, scheme=s))
    return out


def data_test(a, b):
    """The data test alone, as auto runs it (canonical operands)."""
    s = jaxemu.get_scheme("auto")
    a3, b3 = (a, b) if a.ndim == 3 else (a[None], b[None])
    t = auto.DataTest.of(a3, b3, s)
    return t.fp16x3_ok, t.bf16x6_ok


def relerr(c, a, b):
    with jax.enable_x64(True):
        ref = jnp.matmul(a.astype(jnp.float64), b.astype(jnp.float64), precision=lax.Precision.HIGHEST)
        return float(jnp.linalg.norm(c.astype(jnp.float64) - ref) / jnp.linalg.norm(ref))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--shapes", action="store_true", help="also the benchmark's shapes (part 2)")
    p.add_argument("--out", default=None, help="JSON file for the results")
    p.add_argument("--laws", default=",".join(LAWS), help="input laws of part 1, comma-separated ('' skips it)")
    args = p.parse_args(argv)
    dev = jax.devices()[0]
    print(f"{dev.device_kind} ({dev.platform}), jax {jax.__version__}, jaxemu {jaxemu.__version__}; "
          f"{jaxemu.info().auto_cost_model}")
    f = fns()
    test_fn = jax.jit(data_test)
    time = lambda fn, a, b: T.median_time(lambda: fn(a, b), args.reps, min_rep_s=0.05)  # noqa: E731
    results, ok = {"device": dev.device_kind, "jax": jax.__version__, "laws": {}, "shapes": {}}, True

    def check(cond, what):
        nonlocal ok
        ok &= bool(cond)
        print(f"  {'PASS' if cond else 'FAIL'}: {what}")

    n = args.n
    for law in [x for x in args.laws.split(",") if x]:
        a_np, b_np = T.operands(law, n, n, n, seed=1)
        a, b = jax.device_put(a_np), jax.device_put(b_np)
        rep = jaxemu.auto_report(a_np, b_np)
        times = {k: time(fn, a, b) for k, fn in f.items()}
        errs = {k: relerr(fn(a, b), a, b) for k, fn in f.items()}
        t_test = time(test_fn, a, b)
        chosen = rep["scheme"]
        base = times["sgemm"] if chosen == "fp32" else times.get(chosen, times["fp16x3"] if chosen.startswith("fp16x3") else None)
        overhead = times["auto"] / base - 1 if base else None
        r = dict(choice=chosen, test=rep["test"], ms={k: v * 1e3 for k, v in times.items()}, error=errs,
                 test_ms=t_test * 1e3, overhead=overhead)
        results["laws"][law] = r
        print(f"{law}: auto -> {chosen} (test {rep['test']}); data test {t_test * 1e3:.3f} ms")
        for k in f:
            print(f"  {k:7s} {times[k] * 1e3:9.3f} ms  {times['sgemm'] / times[k]:5.2f}x SGEMM  "
                  f"err {errs[k]:.2e} ({errs[k] / errs['sgemm']:.2f}x SGEMM's)")
        if law != "uniform(0,1)":
            check(chosen.startswith("fp16x3"), f"auto takes fp16x3 on {law}")
        check(errs["auto"] <= errs["sgemm"], f"auto's error <= SGEMM's on {law}")
        if overhead is not None:
            check(overhead <= 0.03, f"auto's overhead over {chosen}: {100 * overhead:.1f} % (<= 3 %)")

    if args.shapes:
        for shape in SHAPES:
            bsz, m, k, nn = shape
            pre = (bsz,) if bsz > 1 else ()
            rng = np.random.default_rng(2)
            a_np = T.sample("uniform(-1,1)", pre + (m, k), rng)
            b_np = T.sample("uniform(-1,1)", pre + (k, nn), rng)
            a, b = jax.device_put(a_np), jax.device_put(b_np)
            ok16, ok6 = (bool(x) for x in test_fn(a, b))
            allowed = ["sgemm"] + (["fp16x3"] if ok16 else []) + (["bf16x6"] if ok6 else [])
            times = {kk: time(f[kk], a, b) for kk in allowed + ["auto"]}
            best = min(allowed, key=times.get)
            ratio = times["auto"] / times[best]
            results["shapes"]["x".join(map(str, shape))] = dict(ms={kk: v * 1e3 for kk, v in times.items()},
                                                              best=best, auto_over_best=ratio)
            print(f"{'x'.join(map(str, shape))}: " + ", ".join(f"{kk} {v * 1e3:.3f} ms" for kk, v in times.items()))
            check(ratio <= 1.05, f"auto {ratio:.3f}x the best allowed ({best})")

    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
    print("ALL PASS" if ok else "SOME FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
