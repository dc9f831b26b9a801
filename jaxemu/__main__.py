"""``python -m jaxemu``: the demo; ``python -m jaxemu info``: what is built and used;
``python -m jaxemu calibrate``: measure auto's cost model on this device and cache it.

The demo multiplies two random matrices with every scheme on the default
device and prints, per scheme, the error against the float64 product, the
ratio to FP32's own error, and the time (median of repeated runs).
"""
from __future__ import annotations

import argparse
import sys

import jax


def demo(n: int, k: int, law: str, seed: int) -> None:
    import jaxemu
    import jaxemu.backends
    from jaxemu import testing as T

    dev = jax.devices()[0]
    print(f"jaxemu {jaxemu.__version__} | jax {jax.__version__} | device: {dev.device_kind} ({dev.platform})")
    print(f"C = A @ B with A: {n}x{k}, B: {k}x{n}, entries {law}; error = ||C - C64||_F / ||C64||_F\n")
    a, b = T.operands(law, n, k, n, seed)
    ref = T.reference(a, b)
    da, db = jax.device_put(a), jax.device_put(b)
    rows, e32 = [], None
    # float32 operands: the FP64 scheme (ozaki2_f64) takes float64 arrays.
    for name in [x for x in jaxemu.schemes() if jaxemu.get_scheme(x).operand_dtype == "float32"]:
        f = jax.jit(lambda x, y, s=name: jaxemu.dot(x, y, scheme=s))
        t = T.median_time(lambda: f(da, db))
        e = T.relerr(f(da, db), ref)
        e32 = e if name == "fp32" else e32
        s = jaxemu.get_scheme(name)
        rows.append((name, e, t, s.num_products, jaxemu.backends.backend_for(name)))
    print(f"{'scheme':15s} {'products':>8s} {'backend':>8s} {'rel. error':>11s} {'/ FP32':>8s} {'time ms':>9s}")
    for name, e, t, p, be in rows:
        print(f"{name:15s} {p:8d} {be:>8s} {e:11.3e} {e / e32:8.2f} {t * 1e3:9.3f}")
    if dev.platform == "cpu":
        print("\n(on a CPU the low-precision products are computed in FP32 arithmetic: times here say "
              "nothing about tensor cores; run on a GPU, or see docs/performance.md)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m jaxemu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", nargs="?", default="demo", choices=["demo", "info", "calibrate"])
    p.add_argument("--n", type=int, default=256, help="M = N (default 256)")
    p.add_argument("--k", type=int, default=1024, help="K (default 1024)")
    p.add_argument("--law", default="uniform(-1,1)", help="input law (see jaxemu.testing.LAWS)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.command == "info":
        import jaxemu
        print(jaxemu.info())
        return 0
    if args.command == "calibrate":
        from jaxemu import costs
        model = costs.calibrate()
        print(f"{model.device} ({model.backend} backend): {model.source}, cached in {costs.cache_path()}")
        rows = list(model.coefficients) + [(f"{s} on path {p}", c) for s, p, c in model.paths]
        for name, (inv_rate, per_out, per_in, fixed) in rows:
            print(f"  {name:7s} {1e-9 / inv_rate if inv_rate else float('inf'):10.4g} GFLOP/s  "
                  f"{per_out * 1e12:8.3f} ps/output  {per_in * 1e12:8.3f} ps/input  {fixed * 1e6:8.1f} us fixed")
        return 0
    demo(args.n, args.k, args.law, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
