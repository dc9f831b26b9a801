"""Accuracy of Ozaki scheme II (ozaki2_f32 / ozaki2_f64) on the four input laws.

    python scripts/ozaki_accuracy.py [--m 128] [--n 128] [--ks 256,1024,4096] [--seed 0]

Prints markdown tables (docs/accuracy.md, section "Ozaki scheme II"):
ozaki2_f32's relative Frobenius error against the float64 product, as a
multiple of the native FP32 product's error, for the default number of
moduli (norm-rule scaling, and the max rule beside it) and for fewer (the
accuracy/speed knob); then ozaki2_f64's error
against the exact product (Python integers) as a multiple of numpy's DGEMM.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxemu  # noqa: E402
from jaxemu import testing as T  # noqa: E402


def f32_table(m, n, ks, seed, knob=(6, 7, 8)):
    s = jaxemu.get_scheme("ozaki2_f32")
    out = ["| law | M x K x N | FP32 error | default moduli | ratio | max rule | "
           + " | ".join(f"{q} moduli" for q in knob) + " |", "|---" * (6 + len(knob)) + "|"]
    shapes = [(m, k, n) for k in ks] + [(8, 65536, 8)]
    for law in T.LAWS:
        for (mm, k, nn) in shapes:
            a, b = T.operands(law, mm, k, nn, seed + k)
            ref = T.reference(a, b)
            e32 = T.relerr(jaxemu.dot(a, b, scheme="fp32"), ref)
            run = lambda sc: T.relerr(jax.jit(lambda x, y: jaxemu.dot(x, y, scheme=sc))(a, b), ref)
            e = run(s)
            cells = [f"{run(s.replace(moduli=q)) / e32:.3g}" for q in knob]
            e_max = run(s.replace(scaling="max"))
            out.append(f"| {law} | {mm} x {k} x {nn} | {e32:.2e} | {s.moduli_for(k)} | {e / e32:.3g} | "
                       f"{e_max / e32:.3g} | " + " | ".join(cells) + " |")
            print(out[-1], file=sys.stderr, flush=True)
    return "\n".join(out)


def f64_table(m, k, n, seed):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_ozaki import exact_product, sample64
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(seed)
    out = ["| law | M x K x N | DGEMM error | ozaki2_f64 moduli | ozaki2_f64 error | ratio |", "|---" * 6 + "|"]
    s = jaxemu.get_scheme("ozaki2_f64")
    for law in T.LAWS:
        a, b = sample64(law, (m, k), rng), sample64(law, (k, n), rng)
        ref = exact_product(a, b)
        e64 = T.relerr(a @ b, ref)
        e = T.relerr(jaxemu.dot(a, b, scheme="ozaki2_f64"), ref)
        out.append(f"| {law} | {m} x {k} x {n} | {e64:.2e} | {s.moduli_for(k)} | {e:.2e} | {e / e64:.3g} |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--m", type=int, default=128)
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--ks", default="256,1024,4096,8192,16384")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    dev = jax.devices()[0]
    print(f"jax {jax.__version__}, {dev.device_kind} ({dev.platform})\n")
    print(f32_table(args.m, args.n, [int(k) for k in args.ks.split(",")], args.seed))
    print()
    print(f64_table(16, 1024, 16, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
