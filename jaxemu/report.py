"""``python -m jaxemu.report``: accuracy of every scheme against float64.

For each scheme, input law (DESIGN.md 6) and K, the relative Frobenius error
of C = A @ B against the float64 product of the same float32 inputs, next to
FP32's own error on the same inputs, on the default device. Writes a
markdown table (docs/accuracy.md by default) and prints it.
"""
from __future__ import annotations

import argparse
import datetime
import platform
import sys

import jax


KEEP_MARKER = "<!-- The sections below are kept by `python -m jaxemu.report`"


def measure(names, laws, ks, m, n, seed, backend=None):
    import jaxemu
    from jaxemu import testing as T
    rows = []
    for law in laws:
        for k in ks:
            a, b = T.operands(law, m, k, n, seed + k)
            ref = T.reference(a, b)
            da, db = jax.device_put(a), jax.device_put(b)
            errs = {}
            for name in ["fp32"] + [x for x in names if x != "fp32"]:
                f = jax.jit(lambda x, y, s=name: jaxemu.dot(x, y, scheme=s, backend=backend))
                errs[name] = T.relerr(f(da, db), ref)
            rows.append(dict(law=law, k=k, errors=errs))
            print(f"  {law:14s} K={k:6d} done", file=sys.stderr, flush=True)
    return rows


def to_markdown(rows, names, m, n) -> str:
    import jaxemu
    dev = jax.devices()[0]
    out = [
        "# Accuracy of the schemes",
        "",
        f"Measured by `python -m jaxemu.report` on {dev.device_kind} ({dev.platform}), jax {jax.__version__}, "
        f"jaxemu {jaxemu.__version__}, {datetime.date.today().isoformat()} ({platform.machine()}).",
        "",
        f"C = A @ B with A: {m} x K, B: K x {n}, float32 entries drawn from each law; error = "
        "||C - C64||_F / ||C64||_F against the float64 product of the same inputs. The FP32 column is "
        "the native float32 product's own error (`lax.Precision.HIGHEST`); the other columns give the "
        "ratio of each scheme's error to it (below 1: more accurate than FP32).",
        "",
        "On a CPU the slice products are exact and accumulated in FP32 (round to nearest), so these "
        "figures isolate the schemes' splitting and dropped terms; on a GPU the tensor cores' "
        "accumulation adds its own error, which the promotion interval kc controls (see "
        "docs/performance.md for GPU figures). `auto` runs native FP32 on products this small "
        "(its size dispatch), hence its ratio of 1; docs/auto.md has its data test.",
        "",
    ]
    head = "| law | K | FP32 error | " + " | ".join(x for x in names if x != "fp32") + " |"
    out += [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        e32 = r["errors"]["fp32"]
        cells = [f"{r['errors'][x] / e32:.3g}" for x in names if x != "fp32"]
        out.append(f"| {r['law']} | {r['k']} | {e32:.2e} | " + " | ".join(cells) + " |")
    out += ["", "Absolute errors:", ""]
    head = "| law | K | " + " | ".join(names) + " |"
    out += [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        out.append(f"| {r['law']} | {r['k']} | " + " | ".join(f"{r['errors'][x]:.2e}" for x in names) + " |")
    out += ["", "Stated bounds (the tests hold every scheme to these):", "",
            "| scheme | products | FP32-class | bound |", "|---|---|---|---|"]
    for x in names:
        s = jaxemu.get_scheme(x)
        b = "<= 2 x FP32's error" if s.fp32_class else f"<= {s.error_bound():.2e} (4 x unit roundoff)"
        out.append(f"| {x} | {s.num_products} | {'yes' if s.fp32_class else 'no'} | {b} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    import jaxemu
    p = argparse.ArgumentParser(prog="python -m jaxemu.report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--m", type=int, default=128)
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--ks", default="256,1024,4096")
    # float32 schemes (the laws draw float32 operands; ozaki2_f64 takes float64).
    p.add_argument("--schemes", default=",".join(x for x in jaxemu.schemes()
                                                 if jaxemu.get_scheme(x).operand_dtype == "float32"))
    p.add_argument("--backend", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="docs/accuracy.md", help="markdown file to write ('-' for none)")
    args = p.parse_args(argv)
    from jaxemu import testing as T
    names = args.schemes.split(",")
    rows = measure(names, T.LAWS, [int(k) for k in args.ks.split(",")], args.m, args.n, args.seed,
                   args.backend)
    md = to_markdown(rows, names, args.m, args.n)
    print(md)
    if args.out != "-":
        # Hand-written sections below KEEP_MARKER (the Ozaki II section) survive.
        import os
        kept = ""
        if os.path.exists(args.out):
            with open(args.out) as f:
                old = f.read()
            if KEEP_MARKER in old:
                kept = "\n" + old[old.index(KEEP_MARKER):]
        with open(args.out, "w") as f:
            f.write(md + kept)
    return 0


if __name__ == "__main__":
    sys.exit(main())
