"""Measure the points of auto's shipped cost model (jaxemu/costs.py) on this GPU.

    python scripts/cost_points.py [--repeats 10]

Times fp32 (SGEMM), fp16x3 and bf16x6 through the backend auto uses, on the
shapes of costs._H200_SGEMM, and prints them in that file's format
(milliseconds for SGEMM, speedups over it for the schemes), to paste there
when the kernels change.
"""
from __future__ import annotations

import argparse

import jax

from jaxemu import costs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args(argv)
    shapes = list(costs._H200_SGEMM)
    dev = jax.devices()[0]
    pts = costs.measure_points(shapes, dev, args.repeats)
    print(f"# {dev.device_kind}, jax {jax.__version__}: (B, M, N, K) -> SGEMM ms, speedups")
    print("_SGEMM = {" + ", ".join(f"{s}: {pts['fp32'][s] * 1e3:.3f}" for s in shapes) + "}")
    for name in ("fp16x3", "bf16x6"):
        xs = ", ".join(f"{pts['fp32'][s] / pts[name][s]:.2f}" for s in shapes)
        print(f'    "{name}": ({xs}),')


if __name__ == "__main__":
    main()
