"""Where XLA put the custom calls of kNN's chunked search (examples/knn.py's
knn_chunked: lax.map over chunks of queries, the database the same in every
chunk): per computation of the optimized HLO, the jaxemu custom calls and
fusions it holds, and which computations are while bodies. A split kernel in
the loop body runs once per chunk; one in the entry computation was hoisted.

    JAX_PLATFORMS=cuda python scripts/loop_hoist_probe.py [--scheme fp16x3] [--n 1048576]
"""
from __future__ import annotations

import argparse
import re
from collections import Counter

import jax
import jax.numpy as jnp

import jaxemu
from examples import knn as kn


def computations(hlo: str):
    """name -> text of each computation of an HLO module's text."""
    out, name, body = {}, None, []
    for line in hlo.splitlines():
        m = re.match(r"^(ENTRY )?%?([\w.\-]+) .*\{\s*$", line)
        if m and not line.startswith(" "):
            name, body = ("ENTRY " if m.group(1) else "") + m.group(2), []
            continue
        if line.startswith("}") and name is not None:
            out[name] = "\n".join(body)
            name = None
            continue
        if name is not None:
            body.append(line)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scheme", default="fp16x3")
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--queries", type=int, default=8192)
    p.add_argument("--chunk", type=int, default=2048)
    p.add_argument("--dump", help="write the optimized HLO module's text to this file")
    args = p.parse_args(argv)
    q = jax.ShapeDtypeStruct((args.queries, 128), jnp.float32)
    db = jax.ShapeDtypeStruct((args.n, 128), jnp.float32)
    f = jax.jit(jaxemu.emulate(lambda q, db: kn.knn_chunked(q, db, 10, args.chunk), scheme=args.scheme))
    hlo = f.lower(q, db).compile().as_text()
    if args.dump:
        with open(args.dump, "w") as fh:
            fh.write(hlo)
    comps = computations(hlo)
    bodies = set(re.findall(r"body=%?([\w.\-]+)", hlo))
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}, scheme {args.scheme}: "
          f"{len(comps)} computations, while bodies: {sorted(bodies)}")
    for name, text in comps.items():
        calls = Counter(re.findall(r'custom_call_target="([\w.\-]+)"', text))
        where = "WHILE BODY" if name in bodies else ("entry" if name.startswith("ENTRY") else "other")
        if where != "other":  # what the loop's database reductions became: each fusion's first op name
            fus = Counter(m.split("/")[-1] for m in re.findall(r'kind=k\w+, calls=[^\n]*?op_name="([^"]+)"', text))
            print(f"  {where:<10} {name[:40]:<40} fusions: " + ", ".join(f"{k} x{v}" for k, v in sorted(fus.items())))
        if calls:
            print(f"  {where:<10} {name[:60]:<60} " + ", ".join(f"{k} x{v}" for k, v in sorted(calls.items())))


if __name__ == "__main__":
    main()
