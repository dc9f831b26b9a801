"""Where a kernel's warps spend their time, by stretch of code: ncu's
per-instruction warp-state samples summed over consecutive instructions.

    ncu --section WarpStateStats --section SourceCounters -k regex:fused_gemm -c 1 -o R python3 ...
    ncu -i R.ncu-rep --page source --csv --print-source sass > R.csv
    python3 scripts/ncu_sass_regions.py R.csv [--bucket 48]

One line per stretch of --bucket instructions (in address order): its share
of all samples and of the not-issued ones, the instructions executed, and
the opcodes that take most of its samples, so that the mainloop (HGMMA,
WARPGROUP.DEPBAR), the promotions (FFMA), the epilogue (STS, FENCE,
UTMASTG) and the wait loops (SYNCS, NANOSLEEP, BRA) show as separate rows.
The top single instructions follow. (Stop 31's top-instruction list alone
left ~70 % of a short-K tile's samples spread over thousands of
instructions: docs/performance.md.)
"""
from __future__ import annotations

import argparse
import collections
import csv


def _num(s: str) -> float:
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0


def load(path: str):
    """[(address, sass text, samples, not-issued samples, executed)] in file order."""
    rows = list(csv.reader(open(path)))
    head = next(i for i, r in enumerate(rows) if "Source" in [c.strip() for c in r])
    names = [c.strip() for c in rows[head]]

    def col(*cands):
        for c in cands:
            if c in names:
                return names.index(c)
        return None

    src, addr = col("Source"), col("Address")
    allc = col("Warp Stall Sampling (All Samples)", "Warp Stall Sampling (All Cycles)")
    notc = col("Warp Stall Sampling (Not-issued Samples)", "Warp Stall Sampling (Not Issued Cycles)")
    exe = col("Instructions Executed")
    if src is None or allc is None:
        raise SystemExit(f"no Source / samples columns in {path}: {names[:12]}")
    out = []
    for r in rows[head + 1:]:
        if len(r) <= max(src, allc):
            continue
        out.append((r[addr] if addr is not None else "", r[src].strip(), _num(r[allc]),
                    _num(r[notc]) if notc is not None else 0.0, _num(r[exe]) if exe is not None else 0.0))
    return out


def opcode(text: str) -> str:
    words = [w for w in text.split() if not w.startswith("@")]
    return words[0].split(".")[0] if words else "?"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv")
    p.add_argument("--bucket", type=int, default=48, help="instructions per row")
    p.add_argument("--min-share", type=float, default=0.5, help="hide rows below this % of the samples")
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    ins = load(args.csv)
    total = sum(i[2] for i in ins) or 1.0
    total_not = sum(i[3] for i in ins) or 1.0
    print(f"{len(ins)} instructions, {total:.0f} samples ({total_not:.0f} not issued)")
    print(f"{'first address':>16s} {'n':>4s} {'samples':>8s} {'not-iss':>8s} {'executed':>10s}  opcodes by samples")
    hidden = 0.0
    for b in range(0, len(ins), args.bucket):
        chunk = ins[b:b + args.bucket]
        s = sum(i[2] for i in chunk)
        if 100 * s / total < args.min_share:
            hidden += s
            continue
        ops = collections.Counter()
        for i in chunk:
            ops[opcode(i[1])] += i[2]
        top = ", ".join(f"{o} {100 * v / total:.1f}" for o, v in ops.most_common(4) if v > 0)
        print(f"{chunk[0][0]:>16s} {len(chunk):4d} {100 * s / total:7.1f}% {100 * sum(i[3] for i in chunk) / total_not:7.1f}%"
              f" {sum(i[4] for i in chunk):10.0f}  {top}")
    print(f"(rows below {args.min_share} % each: {100 * hidden / total:.1f} % in all)")
    print("top instructions (% of samples, % of not-issued):")
    for a, text, s, n, _ in sorted(ins, key=lambda i: -i[2])[:args.top]:
        print(f"  {100 * s / total:5.1f} {100 * n / total_not:5.1f}  {a:>16s}  {text[:100]}")


if __name__ == "__main__":
    main()
