"""Where a MixPert product's time goes on the GPU (issue 14): SGEMM, the
MixPert kernel alone on packed operands, the whole product
(split, kernel, fallback conditional), the product with another fallback
route (--compare: by default the tile-by-tile XLA route,
$JAXEMU_CUDA_MIXPERT_FALLBACK=0) and the same
scheme with no tile falling back (max_spread = 40), same run; with --xla
also the product with XLA's split, and on the xla backend.

    JAX_PLATFORMS=cuda,cpu python3 scripts/mixpert_probe.py [--shapes 1x8192x8192x8192,...]
"""
import argparse
import os

import dataclasses  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxemu  # noqa: E402
from jaxemu import testing as T  # noqa: E402
from jaxemu.backends import cuda_mixpert as CM  # noqa: E402
from jaxemu.backends import xla as X  # noqa: E402
from jaxemu.schemes import get_scheme  # noqa: E402


def route(ap, bp, s):
    """cuda_mixpert.gathered_fallback's route on these operands (0 none, 1
    the fallback kernel, 2 tile by tile in XLA, 3 gathered rows and columns,
    4 whole products) and the share of tiles that fall back."""
    _, _, oka = CM.split(ap, s, columns=False)
    _, _, okb = CM.split(bp, s, columns=True)
    r = CM.fallback_route(~oka, ~okb, s, kernel=True)
    share = (float(jnp.sum(~oka)) + float(jnp.sum(~okb))) / (oka.size + okb.size)
    return f"{int(r)} ({share * 100:.3f} % of tiles fall back)"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="1x8192x8192x8192,1x1024x1048576x256,1x1048576x256x1024")
    p.add_argument("--schemes", default="int8_l1,int8_l4")
    p.add_argument("--compare", default="JAXEMU_CUDA_MIXPERT_FALLBACK=0",
                   help="VAR=value: the product again with this switch (another fallback route)")
    p.add_argument("--kernel-only", action="store_true", help="time the kernel alone (for A/B of kernel variants)")
    p.add_argument("--xla", action="store_true", help="also time the product with XLA's split, and on the xla backend")
    args = p.parse_args()
    print("device", jax.devices()[0].device_kind, "jax", jax.__version__)
    for shape in args.shapes.split(","):
        _, m, k, n = map(int, shape.split("x"))
        rng = np.random.default_rng(0)
        a = jnp.asarray(rng.uniform(-1, 1, (m, k)).astype(np.float32))
        b = jnp.asarray(rng.uniform(-1, 1, (k, n)).astype(np.float32))
        sgemm = jax.jit(lambda a, b: jnp.dot(a, b, precision="highest"))
        t_s = T.median_time(lambda: sgemm(a, b).block_until_ready())
        print(f"{shape}: sgemm {t_s * 1e3:.3f} ms")
        for name in args.schemes.split(","):
            s = get_scheme(name)
            ap, bp = X.pad_k(a[None], b[None], CM.TILE_K)
            packed = jax.jit(lambda a, b: CM.pack(*X.int8_tile_stats(a, b, s)[2:], s))(ap, bp)
            packed = jax.block_until_ready(packed)
            ks = jax.jit(CM.kernel_sum)
            t_k = T.median_time(lambda: ks(*packed).block_until_ready())
            if args.kernel_only:
                print(f"  {name}: kernel {t_k * 1e3:.3f} ms ({t_s / t_k:.2f}x SGEMM)")
                continue
            full = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=s, backend="cuda"))
            t_f = T.median_time(lambda: full(a, b).block_until_ready())
            # Another fallback route: a fresh trace reads the switch.
            var, value = args.compare.split("=")
            os.environ[var] = value
            other = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=s, backend="cuda"))
            t_g = T.median_time(lambda: other(a, b).block_until_ready())
            c_g, c_f = other(a, b), full(a, b)
            diff = float(jnp.max(jnp.abs(c_g - c_f)) / jnp.max(jnp.abs(c_f)))
            os.environ.pop(var)
            print(f"  {name}: route {route(ap, bp, s)}; product with {args.compare} "
                  f"{t_g * 1e3:.3f} ms ({t_s / t_g:.2f}x SGEMM; max |difference| / max |C| against the default {diff:.1e})")
            s40 = dataclasses.replace(s, name=name + "_s40", max_spread=40)
            nofb = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=s40, backend="cuda"))
            t_n = T.median_time(lambda: nofb(a, b).block_until_ready())
            print(f"  {name}: kernel {t_k * 1e3:.3f} ms ({t_s / t_k:.2f}x SGEMM), product {t_f * 1e3:.3f} ms "
                  f"({t_s / t_f:.2f}x), no fallback {t_n * 1e3:.3f} ms ({t_s / t_n:.2f}x)")
            if args.xla:  # the switch is read at trace time: the jit below traces anew
                os.environ["JAXEMU_CUDA_MIXPERT_SPLIT"] = "0"
                f = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=s, backend="cuda"))
                t = T.median_time(lambda: f(a, b).block_until_ready(), repeats=3)
                os.environ.pop("JAXEMU_CUDA_MIXPERT_SPLIT")
                print(f"  {name}: product with XLA's split {t * 1e3:.3f} ms ({t_s / t:.2f}x)")
                f = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=s, backend="xla"))
                t = T.median_time(lambda: f(a, b).block_until_ready(), repeats=3)
                print(f"  {name}: product on the xla backend {t * 1e3:.3f} ms ({t_s / t:.2f}x)")


if __name__ == "__main__":
    main()
