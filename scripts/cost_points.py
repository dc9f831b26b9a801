"""Measure the points of auto's shipped cost model (jaxemu/costs.py) on this GPU.

    python scripts/cost_points.py [--repeats 10]

Times fp32 (SGEMM), fp16x3 and bf16x6 through the backend auto uses, on the
shapes of costs._H200_SGEMM and ``--extra`` ones, and prints them in that
file's format (milliseconds for SGEMM, speedups over it for the schemes), to
paste there when the kernels change, with the kernel path bf16x6 takes on
each shape (costs.path_of: a path is fit apart from >= 4 shapes; the
FP32-operand kernel's are the outputs of at most a wave of tiles).
"""
from __future__ import annotations

import argparse

import jax

from jaxemu import costs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--extra", default="1x512x512x65536", help="more shapes, B x M x N x K, comma-separated")
    args = p.parse_args(argv)
    extra = [tuple(int(x) for x in e.split("x")) for e in args.extra.split(",") if e]
    shapes = list(costs._H200_SGEMM) + [s for s in extra if s not in costs._H200_SGEMM]
    dev = jax.devices()[0]
    pts = costs.measure_points(shapes, dev, args.repeats)
    print(f"# {dev.device_kind}, jax {jax.__version__}: (B, M, N, K) -> SGEMM ms, speedups")
    print("# bf16x6's kernel path per shape: " + ", ".join(costs.path_of("cuda", "bf16x6", s) or "main" for s in shapes))
    print("_SGEMM = {" + ", ".join(f"{s}: {pts['fp32'][s] * 1e3:.3f}" for s in shapes) + "}")
    for name in ("fp16x3", "bf16x6"):
        xs = ", ".join(f"{pts['fp32'][s] / pts[name][s]:.2f}" for s in shapes)
        print(f'    "{name}": ({xs}),')


if __name__ == "__main__":
    main()
