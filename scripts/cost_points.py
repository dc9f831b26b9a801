"""Measure the points of auto's shipped cost model (jaxemu/costs.py) on this GPU.

    python scripts/cost_points.py [--repeats 10]

Times fp32 (SGEMM), fp16x3 and bf16x6 through the backend auto uses, on the
shapes of costs._H200_SGEMM and ``--extra`` ones, and prints them in that
file's format (milliseconds for SGEMM, speedups over it for the schemes), to
paste there when the kernels change, with the kernel path fp16x3 and bf16x6
take on each shape (costs.path_of: a path is fit apart from >= 4 shapes; the
FP32-operand kernel's are the outputs of at most a wave of tiles for bf16x6,
M N / (M + N) <= 384 for fp16x3). ``--save`` caches that fit for auto here.
"""
from __future__ import annotations

import argparse

import jax

from jaxemu import costs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--extra", default="1x512x512x65536", help="more shapes, B x M x N x K, comma-separated")
    p.add_argument("--save", action="store_true",
                   help="also cache the model fit to these points (as the shipped one would be, each kernel "
                        "path apart) for auto on this machine (costs.cache_path(), JAXEMU_CACHE_DIR), to "
                        "time auto with it before shipping them")
    args = p.parse_args(argv)
    extra = [tuple(int(x) for x in e.split("x")) for e in args.extra.split(",") if e]
    shapes = list(costs._H200_SGEMM) + [s for s in extra if s not in costs._H200_SGEMM]
    dev = jax.devices()[0]
    pts = costs.measure_points(shapes, dev, args.repeats)
    print(f"# {dev.device_kind}, jax {jax.__version__}: (B, M, N, K) -> SGEMM ms, speedups")
    for name in ("fp16x3", "bf16x6"):
        print(f"# {name}'s kernel path per shape: " + ", ".join(costs.path_of("cuda", name, s) or "main" for s in shapes))
    print("_SGEMM = {" + ", ".join(f"{s}: {pts['fp32'][s] * 1e3:.3f}" for s in shapes) + "}")
    for name in ("fp16x3", "bf16x6"):
        xs = ", ".join(f"{pts['fp32'][s] / pts[name][s]:.2f}" for s in shapes)
        print(f'    "{name}": ({xs}),')
    if args.save:
        from jaxemu.backends import backend_for
        model = costs.CostModel.from_points(dev.device_kind, backend_for("auto", dev.platform),
                                            f"cost_points.py on this machine ({len(shapes)} shapes)", pts)
        costs.cache_model(model)
        print(f"# cached for auto: {costs.cache_path()}")


if __name__ == "__main__":
    main()
