"""Where the MixPert fallback's time goes on the GPU (issue 14): on one
product's flags, the split, the route, the fallback kernel, the fallback
tile by tile in XLA and its
two sides (and the transposed copy of A that the column side reads), the
gathered rows and columns, against SGEMM and the kernel, same run.

    JAX_PLATFORMS=cuda,cpu python3 scripts/fallback_probe.py [--shapes 1x1024x1048576x256,...]
"""
import argparse

import jax
import jax.numpy as jnp
import numpy as np

from jaxemu import testing as T
from jaxemu.backends import cuda_mixpert as CM
from jaxemu.backends import xla as X
from jaxemu.schemes import get_scheme


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="1x8192x8192x8192,1x1024x1048576x256,1x1048576x256x1024")
    p.add_argument("--scheme", default="int8_l4")
    args = p.parse_args()
    s = get_scheme(args.scheme)
    print("device", jax.devices()[0].device_kind, "jax", jax.__version__)
    for shape in args.shapes.split(","):
        _, m, k, n = map(int, shape.split("x"))
        rng = np.random.default_rng(0)
        a = jnp.asarray(rng.uniform(-1, 1, (1, m, k)).astype(np.float32))
        b = jnp.asarray(rng.uniform(-1, 1, (1, k, n)).astype(np.float32))
        a, b = X.pad_k(a, b, CM.TILE_K)
        sgemm = jax.jit(lambda a, b: jnp.matmul(a, b, precision="highest"))
        times = {"sgemm": T.median_time(lambda: sgemm(a, b).block_until_ready())}
        if jax.devices()[0].platform == "gpu":
            split = jax.jit(lambda a, b: (CM.split(a, s, False), CM.split(b, s, True)))
        else:  # (a smoke test off the GPU: XLA's split, the same flags)
            split = jax.jit(lambda a, b: (lambda st: ((0, 0, st[4][..., 0]), (0, 0, st[7][:, :, 0, :])))(
                X.int8_tile_stats(a, b, s)))
        times["split (both)"] = T.median_time(lambda: jax.block_until_ready(split(a, b)))
        (_, _, oka), (_, _, okb) = split(a, b)
        bad_a, bad_b = ~oka, ~okb
        caps_a, caps_b = CM.fallback_caps(1, m, k, n, s)[:2]
        c = jnp.zeros((1, m, n), jnp.float32)
        route = jax.jit(lambda x, y: CM.fallback_route(x, y, s, kernel=True))
        times["route"] = T.median_time(lambda: route(bad_a, bad_b).block_until_ready())
        parts = {
            "fallback kernel": lambda c, a, b, x, y: CM.kernel_fallback(c, a, b, ~x, ~y),
            "tile by tile (XLA)": lambda c, a, b, x, y: CM.sparse_fallback(c, a, b, x, y, caps_a, caps_b, s.ktile),
            "  rows side": lambda c, a, b, x, y: CM.sparse_rows(c, a, b, x, caps_a, s.ktile),
            "  columns side": lambda c, a, b, x, y: CM.sparse_columns(c, a, b, x, y, caps_b, s.ktile),
            "  A's good tiles transposed": lambda c, a, b, x, y: jax.vmap(
                lambda a, x: CM.good_tiles_transposed(a, x, s.ktile))(a, x),
            "gathered_fallback (the default's route)": lambda c, a, b, x, y: CM.gathered_fallback(
                c, a, b, ~x[..., None], ~y[:, :, None, :], s, jax.devices()[0].platform.replace("gpu", "cuda")),
        }
        for name, f in parts.items():
            g = jax.jit(f)
            times[name] = T.median_time(lambda: jax.block_until_ready(g(c, a, b, bad_a, bad_b)))
        print(f"{shape} {args.scheme}: route {int(route(bad_a, bad_b))}, caps {caps_a} {caps_b}, "
              f"{float(jnp.sum(bad_a)) :.0f} + {float(jnp.sum(bad_b)):.0f} tiles fall back")
        for name, t in times.items():
            print(f"  {name:42s} {t * 1e3:8.3f} ms  ({t / times['sgemm']:.3f} SGEMM)")


if __name__ == "__main__":
    main()
