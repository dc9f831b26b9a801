"""Could auto's fp16x3 test run after the product instead of before it?
A CPU study for issue 13 (docs/auto.md, "a test after the product").

Today's normwise test (jaxemu/auto.py) needs, besides each row's maximum
and sum of |values| (which fp16x3's split could sum in its own read), a
lower bound on ||C||_F and a term count, both from a probe column of B
multiplied by all of A: that product is what makes the statistics a
second pass over A. After the product, ||C_emul||_F is known (a GEMM
epilogue could sum it), and

    ||C_exact||_F >= ||C_emul||_F - (E + (3 2^-22 + gamma) ||A||_F ||B||_F)

where E is the floor bound auto already uses (2^-48 (||amax|| ||Lb|| +
||La|| ||bmax||)), 3 2^-22 fp16x3's ordinary rounding per product, and
gamma the accumulation's relative error bound, which depends on the
order the backend sums in:
  - "blocked": our fused kernels, tensor-core partial sums over blocks of
    L = 256 values of K promoted to FP32 round-to-nearest (DESIGN.md fact
    1), modelled as (L / 16) 2^-23 for the blocks (one truncating step per
    16-wide k-step) plus (K / L) 2^-24 for the promotions;
  - "serial": an unknown FP32 order (XLA's dot on the CPU), K 2^-24.
fp16x3 would be admitted when E <= 2^-26 LB (BUDGET_EXP), as today. The
term count would come from each row's participation ratio
(sum |a|)^2 / sum a^2 (the split can sum a^2 too), weighted as auto
weighs its probe's counts.

For each law and K (M = N = 64), and for tests/test_auto.py's adversarial
data, it prints: today's decision (auto_report: scheme, ratio, terms), the
post-hoc margin 2^-26 LB / E under both gamma models (>= 1: admitted),
the participation-ratio count, ||A||_F ||B||_F / ||C||_F, and fp16x3's
error against FP32's (float64 reference, CPU).

    python scripts/posthoc_study.py [--ks 64,256,...] [--mn 64]
"""
from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import jaxemu
from jaxemu import auto
from jaxemu import testing as T

U = 2.0 ** -24
BLOCK = 256
# auto with its size thresholds off, ranked by slice-product counts (as
# tests/test_auto.py runs it): the data test runs at every size.
AUTO = jaxemu.get_scheme("auto").replace(min_flops=0.0, min_dim=0, block=32, cost_model="counts")


def gamma(k: int, model: str) -> float:
    if model == "blocked":
        return (min(k, BLOCK) / 16) * 2.0 ** -23 + (-(-k // BLOCK)) * U
    return k * U


def study(a: np.ndarray, b: np.ndarray) -> dict:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    k = a.shape[1]
    exact = a64 @ b64
    nexact = np.linalg.norm(exact)
    fp32 = np.asarray(jnp.matmul(jnp.asarray(a), jnp.asarray(b), precision="highest"), np.float64)
    emul = np.asarray(jaxemu.matmul(jnp.asarray(a), jnp.asarray(b), scheme="fp16x3", backend="xla"), np.float64)
    err32 = np.linalg.norm(fp32 - exact) / nexact
    err16 = np.linalg.norm(emul - exact) / nexact
    amax, la = np.abs(a64).max(1), np.abs(a64).sum(1)
    bmax, lb = np.abs(b64).max(0), np.abs(b64).sum(0)
    e_floor = 2.0 ** auto.FP16X3_FLOOR_EXP * (np.linalg.norm(amax) * np.linalg.norm(lb)
                                             + np.linalg.norm(la) * np.linalg.norm(bmax))
    fro = np.linalg.norm(a64) * np.linalg.norm(b64)
    margins = {}
    for model in ("blocked", "serial"):
        lb_c = np.linalg.norm(emul) - (e_floor + (3 * 2.0 ** -22 + gamma(k, model)) * fro)
        margins[model] = (2.0 ** auto.BUDGET_EXP * lb_c / e_floor) if e_floor > 0 else np.inf
    # Participation ratio per row of A / column of B, averaged with weight
    # max^2 (as auto weighs its probe's counts), the smaller side.
    def pr(x, axis):
        s1, s2 = np.abs(x).sum(axis), (x * x).sum(axis)
        w = np.abs(x).max(axis) ** 2
        ok = s2 > 0
        return float(np.sum(w[ok] * s1[ok] ** 2 / s2[ok]) / max(np.sum(w[ok]), 1e-300))
    rep = jaxemu.auto_report(a, b, AUTO)
    test = rep["test"] or {}
    return dict(scheme=rep["scheme"], ratio=test.get("ratio", float("nan")), terms=test.get("terms", float("nan")),
                blocked=margins["blocked"], serial=margins["serial"], pr=min(pr(a64, 1), pr(b64, 0)),
                spread=fro / nexact, err=err16 / err32)


def row(label, r):
    print(f"{label:34s} {r['scheme']:>14s} {r['ratio']:9.2e} {r['terms']:8.1f} | {r['blocked']:9.2e} "
          f"{r['serial']:9.2e} {r['pr']:8.1f} {r['spread']:9.1f} | {r['err']:6.2f}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ks", default="64,256,1024,4096,16384,65536")
    p.add_argument("--mn", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from test_auto import adversarial
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}; M = N = {args.mn}; budget 2^{auto.BUDGET_EXP}, "
          f"MIN_TERMS {auto.MIN_TERMS}")
    print(f"{'case':34s} {'today':>14s} {'ratio':>9s} {'terms':>8s} | {'blocked':>9s} {'serial':>9s} "
          f"{'PR':>8s} {'AB/C':>9s} | {'err':>6s}")
    rng = np.random.default_rng(args.seed)
    for law in T.LAWS:
        for k in (int(x) for x in args.ks.split(",")):
            a, b = (T.sample(law, s, rng) for s in ((args.mn, k), (k, args.mn)))
            row(f"{law} K={k}", study(a, b))
    for kind in ("block magnitudes", "row magnitudes", "tiny partners", "half the rows wide",
                 "half the columns wide", "subnormals and zero rows"):
        row(kind, study(*adversarial(kind, np.random.default_rng(args.seed))))
    # Sums of few products: rows with 8 nonzeros of 256, and K = 8.
    a, b = T.sample("uniform(-1,1)", (args.mn, 256), rng), T.sample("uniform(-1,1)", (256, args.mn), rng)
    a[:, 8:] = 0.0
    row("8 nonzeros of 256 per row", study(a, b))
    a, b = T.sample("uniform(0,1)", (args.mn, 8), rng), T.sample("uniform(0,1)", (8, args.mn), rng)
    row("uniform(0,1) K=8", study(a, b))


if __name__ == "__main__":
    main()
