"""Where fp16x3's time goes on issue 10's k-means update with dense operands
(1024 x 2^20 x 256, normal(0,1)), in one process on the GPU: SGEMM, the
whole fp16x3 product (the FP32-operand kernel, cuda_fused.f32_product), and
the one XLA reduction per operand that gives fp16x3's row and column
scaling exponents before the kernel can start (cuda_fused.f32_row_exponents).

    JAX_PLATFORMS=cuda,cpu python3 scripts/kmeans_update_parts.py
"""
import time

import jax
import jax.numpy as jnp

import jaxemu
from jaxemu.backends import xla as xla_backend


def ms_per_call(f, *args, reps=10):
    """Wall time per call after two warm-up calls (the device queue drained)."""
    f(*args).block_until_ready()
    f(*args).block_until_ready()
    t0 = time.perf_counter()
    for _ in range(reps):
        r = f(*args)
    r.block_until_ready()
    return (time.perf_counter() - t0) / reps * 1e3


def main():
    ka, kb = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(ka, (1024, 1 << 20), jnp.float32)  # (centres x points): the one-hot^T, dense here
    b = jax.random.normal(kb, (1 << 20, 256), jnp.float32)   # the points
    sgemm = jax.jit(lambda a, b: jnp.dot(a, b, precision="highest"))
    parts = [
        ("sgemm", sgemm, (a, b)),
        ("fp16x3", jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="fp16x3", backend="cuda")), (a, b)),
        ("row exps of A", jax.jit(lambda a: xla_backend.row_scale_exponents(a, 1)), (a,)),
        ("col exps of B", jax.jit(lambda b: xla_backend.row_scale_exponents(b, 0)), (b,)),
        ("sgemm again", sgemm, (a, b)),
    ]
    for name, f, args in parts:
        print(f"{name:16s} {ms_per_call(f, *args):8.3f} ms", flush=True)


if __name__ == "__main__":
    main()
