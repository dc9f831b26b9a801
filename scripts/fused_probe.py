"""Development probe of the fused kernels (GPU): correctness on odd shapes
against float64 and the xla backend, then speed and error against SGEMM on
the issue's shapes, with scheme variants (name@kc=64@growth=1).

    JAX_PLATFORMS=cuda python scripts/fused_probe.py --quick
    JAX_PLATFORMS=cuda python scripts/fused_probe.py --shapes 1x8192x8192x8192
"""
import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jaxemu
from jaxemu import testing as T
from jaxemu.testing import median_time

FLOAT = ["bf16x3", "bf16x6", "bf16x9", "tf32x3", "fp16x3", "fp16x3_bitcut"]


def emu(name, backend="cuda"):
    """name[@kc=64][@growth=1]: a scheme variant; growth sets the fused path's
    LEVEL_KC_GROWTH while this function is traced."""
    from jaxemu.backends import cuda_fused
    base, *opts = name.split("@")
    s = jaxemu.get_scheme(base)
    growth = cuda_fused.LEVEL_KC_GROWTH
    for o in opts:
        key, val = o.split("=")
        if key == "kc":
            s = s.replace(kc=int(val))
        elif key == "growth":
            growth = int(val)
    f = jax.jit(lambda a, b: jaxemu.matmul(a, b, scheme=s, backend=backend))

    def call(a, b):
        old, cuda_fused.LEVEL_KC_GROWTH = cuda_fused.LEVEL_KC_GROWTH, growth
        try:
            return f(a, b)
        finally:
            cuda_fused.LEVEL_KC_GROWTH = old
    return call


def ref64(a, b):
    with jax.enable_x64(True):
        return jnp.matmul(jnp.asarray(a, jnp.float64), jnp.asarray(b, jnp.float64), precision="highest")


def err(c, ref):
    with jax.enable_x64(True):
        c = jnp.asarray(c, jnp.float64)
        return float(jnp.linalg.norm(c - ref) / jnp.linalg.norm(ref))


def correctness(schemes):
    rng = np.random.default_rng(0)
    worst = {}
    fails = 0
    cases = [(1, 1, 1), (7, 17, 129), (17, 4097, 7), (127, 129, 1000), (129, 1, 17), (1000, 17, 127),
             (300, 4097, 500), (1000, 1000, 1000)]
    for name in schemes:
        f = emu(name)
        g = emu(name, backend="xla")
        for m, k, n in cases:
            for batch in ((), (3,)) if (m * n < 20000 and k > 1) else ((),):
                a = rng.uniform(-1, 1, batch + (m, k)).astype(np.float32)
                b = rng.uniform(-1, 1, batch + (k, n)).astype(np.float32)
                c = np.asarray(f(a, b))
                cx = np.asarray(g(a, b))
                r = np.matmul(a.astype(np.float64), b.astype(np.float64))
                den = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))) + 1e-300
                ce = float(np.max(np.abs(c - r) / den))
                cxe = float(np.max(np.abs(cx - r) / den))
                worst[name] = max(worst.get(name, 0), ce / max(cxe, 2.0 ** -24))
                if not np.all(np.isfinite(c)) or ce > 4 * max(cxe, 2.0 ** -23):
                    fails += 1
                    print(f"  FAIL {name} {batch} {m}x{k}x{n}: entrywise err {ce:.2e} vs xla backend {cxe:.2e}")
        # special values: NaN/Inf pattern as FP32's
        a = rng.uniform(-1, 1, (130, 300)).astype(np.float32)
        b = rng.uniform(-1, 1, (300, 70)).astype(np.float32)
        a[3, 5] = np.inf
        a[7, 9] = np.nan
        b[11, 13] = -np.inf
        a[20, :] = 1e36  # row 20 x column 30 overflows in any summation order; the rest cannot
        b[:, 30] = 1e36
        c = np.asarray(f(a, b))
        c32 = np.asarray(jnp.matmul(a, b, precision="highest"))
        bad = sum(int(np.sum(p(c) != p(c32))) for p in (np.isnan, np.isposinf, np.isneginf))
        if bad:
            fails += 1
            print(f"  FAIL {name}: special-value pattern differs from FP32's in {bad} entries")
    # bit-identical reruns (split-K path included)
    a = rng.uniform(-1, 1, (1024, 1 << 17)).astype(np.float32)
    b = rng.uniform(-1, 1, (1 << 17, 256)).astype(np.float32)
    f = emu("bf16x6")
    c1, c2 = np.asarray(f(a, b)), np.asarray(f(a, b))
    if not np.array_equal(c1, c2):
        fails += 1
        print("  FAIL: reruns differ (split-K)")
    print(f"correctness: {fails} failures; worst entrywise error / xla backend's: "
          + ", ".join(f"{k} {v:.2f}" for k, v in worst.items()), flush=True)
    return fails


def bench(shapes, schemes, paths, laws, reps):
    rows = []
    for spec in shapes:
        bsz, m, k, n = (int(x) for x in spec.split("x"))
        for law in laws:
            rng = np.random.default_rng(1)
            pre = (bsz,) if bsz > 1 else ()
            a = jax.device_put(T.sample(law, pre + (m, k), rng))
            b = jax.device_put(T.sample(law, pre + (k, n), rng))
            ref = ref64(a, b)
            flops = 2.0 * bsz * m * n * k
            sg = jax.jit(lambda x, y: jnp.matmul(x, y, precision="highest"))
            t0 = median_time(lambda: sg(a, b), reps, 0.05)
            e0 = err(sg(a, b), ref)
            print(f"{spec} {law}: sgemm {t0 * 1e3:.2f} ms ({flops / t0 / 1e12:.1f} TFLOP/s) err {e0:.2e}", flush=True)
            rows.append(dict(shape=spec, law=law, case="sgemm", ms=t0 * 1e3, err=e0))
            for name in schemes:
                for path in ["cuda"]:
                    f = emu(name)
                    try:
                        t = median_time(lambda: f(a, b), reps, 0.05)
                        e = err(f(a, b), ref)
                    except Exception as ex:
                        print(f"   {name}:{path} FAILED {type(ex).__name__}: {str(ex)[:300]}", flush=True)
                        continue
                    rows.append(dict(shape=spec, law=law, case=f"{name}:{path}", ms=t * 1e3, err=e,
                                     speedup=t0 / t, err_ratio=e / e0))
                    print(f"   {name + ':' + path:22s} {t * 1e3:8.2f} ms {flops / t / 1e12:7.1f} TFLOP/s "
                          f"x{t0 / t:5.2f}  err {e:.2e} ({e / e0:.2f} x sgemm)", flush=True)
            del a, b, ref
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="correctness only")
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--shapes", default="1x8192x8192x8192")
    p.add_argument("--schemes", default=",".join(FLOAT))
    p.add_argument("--paths", default="fused")
    p.add_argument("--laws", default="uniform(-1,1)")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    print(jax.devices(), jax.__version__, flush=True)
    fails = 0 if args.no_check else correctness(args.schemes.split(","))
    rows = []
    if not args.quick:
        rows = bench(args.shapes.split(","), args.schemes.split(","), args.paths.split(","),
                     args.laws.split(";"), args.reps)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
