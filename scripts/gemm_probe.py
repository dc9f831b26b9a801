"""Probe on the GPU: the promoted GEMM alone (against cuBLAS through XLA at the
same shape) per promotion interval, and bf16x6's error per kc on two laws."""
import sys

import jax
import jax.numpy as jnp
import numpy as np

import jaxemu
from jaxemu import testing as T
from jaxemu.bench import time_fn


def gemm(fmt, a, bt, promote):
    out = jax.ShapeDtypeStruct((a.shape[0], a.shape[1], bt.shape[1]), jnp.float32)
    return jax.ffi.ffi_call(f"jaxemu_gemm_{fmt}", out)(a, bt, promote_k=np.int64(promote),
                                                        alpha=np.float32(1), beta=np.float32(0))


def main():
    n = 8192
    key = jax.random.PRNGKey(0)
    rows = []
    for fmt, dt, ks in [("bf16", jnp.bfloat16, [8192, 49152]), ("fp16", jnp.float16, [8192, 24576]),
                        ("tf32", jnp.float32, [8192, 24576])]:
        for k in ks:
            a = jax.random.uniform(key, (1, n, k), jnp.float32, -1, 1).astype(dt)
            bt = jax.random.uniform(jax.random.fold_in(key, 1), (1, n, k), jnp.float32, -1, 1).astype(dt)
            flops = 2.0 * n * n * k
            prec = jax.lax.DotAlgorithmPreset.TF32_TF32_F32 if fmt == "tf32" else None
            cub = jax.jit(lambda x, y: jax.lax.dot_general(x, y, (((2,), (2,)), ((0,), (0,))), precision=prec,
                                                           preferred_element_type=jnp.float32))
            t = time_fn(cub, a, bt, 5)
            rows.append((fmt, k, "xla/cuBLAS", t, flops / t / 1e12))
            for promote in [0, 512, 256, 128, 64] if k == 8192 else [512, 128, 64]:
                if fmt == "tf32" and promote == 0:
                    pass
                f = jax.jit(lambda x, y, p=promote: gemm(fmt, x, y, p))
                t = time_fn(f, a, bt, 5)
                rows.append((fmt, k, f"jaxemu promote={promote}", t, flops / t / 1e12))
            for r in rows[-(6 if k == 8192 else 4):]:
                print(f"{r[0]:5s} K={r[1]:6d} {r[2]:24s} {r[3] * 1e3:8.3f} ms {r[4]:7.1f} TFLOP/s", flush=True)
    # Full products at 8192: where the time goes.
    a, b = T.operands("uniform(-1,1)", n, n, n, seed=0)
    a, b = jax.device_put(a), jax.device_put(b)
    for s in ["bf16x3", "bf16x6", "fp16x3"]:
        f = jax.jit(lambda x, y, s=s: jaxemu.dot(x, y, scheme=s))
        t = time_fn(f, a, b, 5)
        print(f"full {s:8s} {t * 1e3:8.3f} ms {2 * n**3 / t / 1e12:7.1f} TFLOP/s", flush=True)
    # bf16x6 error per kc, both backends, two laws, 4096^3.
    for law in ["uniform(0,1)", "uniform(-1,1)", "normal(0,1)"]:
        a, b = T.operands(law, 4096, 4096, 4096, seed=1)
        ref = T.reference(a, b)
        a, b = jax.device_put(a), jax.device_put(b)
        e32 = T.relerr(jaxemu.dot(a, b, scheme="fp32"), ref)
        line = f"{law:14s} sgemm {e32:.2e}"
        for name in ["bf16x6", "fp16x3", "bf16x3"]:
            for kc in [64, 128, 256, 512]:
                s = jaxemu.get_scheme(name).replace(kc=kc)
                for be in ["cuda", "xla"] if name == "bf16x6" else ["cuda"]:
                    e = T.relerr(jax.jit(lambda x, y: jaxemu.dot(x, y, scheme=s, backend=be))(a, b), ref)
                    line += f" | {name}/{be} kc={kc}: {e / e32:.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
