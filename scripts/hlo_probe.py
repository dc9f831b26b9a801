"""The optimized HLO of one emulated product, reduced to the instructions
that cost a pass over memory or a host round trip: custom calls (the
kernels), copies, conditionals, while loops and dynamic-update-slices,
with their shapes (which copy of C a timeline's MemcpyD2D is, stop 47):

    JAX_PLATFORMS=cuda python scripts/hlo_probe.py [--case sq8192] [--scheme int8_l4] [--full FILE]
"""
from __future__ import annotations

import argparse
import re

import jax

import jaxemu
from kernel_timeline import cases

KEEP = re.compile(r"\b(custom-call|copy|conditional|while|dynamic-update-slice)\(")  # the opcodes
HEADER = re.compile(r"^(ENTRY )?%[\w.-]+ \(.*\) -> .*\{$")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", default="sq8192")
    p.add_argument("--scheme", default="int8_l4")
    p.add_argument("--full", default=None, help="write the whole optimized HLO to this file")
    args = p.parse_args(argv)
    prod, xs = cases()[args.case]()
    text = jax.jit(jaxemu.emulate(prod, scheme=args.scheme)).lower(*xs).compile().as_text()
    if args.full:
        with open(args.full, "w") as f:
            f.write(text)
    header, fused = None, False  # in a fusion's computation, copies are layout changes within one kernel
    for line in text.splitlines():
        if HEADER.match(line.strip()):
            header = line.strip()[:160]
            fused = any(w in header.split("(")[0] for w in ("fused", "wrapped"))
        elif not fused and KEEP.search(line):
            if header:  # (a computation's name, once, before its first kept line: conditionals' branches too)
                print(header)
                header = None
            print("   ", line.strip()[:260])


if __name__ == "__main__":
    main()
