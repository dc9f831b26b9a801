"""Where fp16x3's time goes on issue 10's k-means update with dense operands
(1024 x 2^20 x 256, normal(0,1)), in one process on the GPU: SGEMM, the
whole fp16x3 product (the FP32-operand kernel, cuda_fused.f32_product), and
the one XLA reduction per operand that gives fp16x3's row and column
scaling exponents before the kernel can start (cuda_fused.f32_row_exponents).

    JAX_PLATFORMS=cuda,cpu python3 scripts/kmeans_update_parts.py [normal|wide|spike]

Also fp16x3 with its exponents found in the kernel (the opt-in switch
JAXEMU_CUDA_F32_SCALES_IN_KERNEL=1) and by the passes ("0"); "wide": B's values spread over 33
binades, where a first K-tile's maximum can sit far below a later value;
"spike": B's last row 2^20 times larger, which makes fp16x3 with the
exponents found in the kernel redo the product with the passes'.
"""
import os
import sys
import time

import jax
import jax.numpy as jnp

import jaxemu
from jaxemu.backends import xla as xla_backend

SWITCH = "JAXEMU_CUDA_F32_SCALES_IN_KERNEL"


def ms_per_call(f, *args, reps=10):
    """Wall time per call after two warm-up calls (the device queue drained)."""
    f(*args).block_until_ready()
    f(*args).block_until_ready()
    t0 = time.perf_counter()
    for _ in range(reps):
        r = f(*args)
    r.block_until_ready()
    return (time.perf_counter() - t0) / reps * 1e3


def with_exps_in_kernel(on, f):
    """f called with fp16x3's exponents found in the kernel ("1") or by the
    passes ("0"): the switch is read while the product is lowered, at f's
    first call."""
    def g(*args):
        before = os.environ.get(SWITCH)
        os.environ[SWITCH] = on
        try:
            return f(*args)
        finally:
            if before is None:
                os.environ.pop(SWITCH)
            else:
                os.environ[SWITCH] = before
    return g


def fp16x3(a, b):
    return jaxemu.dot(a, b, scheme="fp16x3", backend="cuda")


def main(law="normal"):
    ka, kb, kw = jax.random.split(jax.random.PRNGKey(0), 3)
    a = jax.random.normal(ka, (1024, 1 << 20), jnp.float32)  # (centres x points): the one-hot^T, dense here
    b = jax.random.normal(kb, (1 << 20, 256), jnp.float32)   # the points
    if law == "wide":  # B's values times 2^j, j uniform in -16..16 (kernel_check's ":wide")
        b = b * jnp.exp2(jax.random.randint(kw, b.shape, -16, 17).astype(jnp.float32))
    if law == "spike":  # B's last row 2^20 times larger: past every column's headroom (the redo's cost)
        b = b.at[-1].multiply(2.0**20)
    print(f"law {law}", flush=True)
    sgemm = jax.jit(lambda a, b: jnp.dot(a, b, precision="highest"))
    parts = [
        ("sgemm", sgemm, (a, b)),
        ("fp16x3, passes' exps", with_exps_in_kernel("0", jax.jit(lambda a, b: fp16x3(a, b))), (a, b)),
        ("fp16x3 in-kernel exps", with_exps_in_kernel("1", jax.jit(lambda a, b: fp16x3(a, b))), (a, b)),
        ("row exps of A", jax.jit(lambda a: xla_backend.row_scale_exponents(a, 1)), (a,)),
        ("col exps of B", jax.jit(lambda b: xla_backend.row_scale_exponents(b, 0)), (b,)),
        ("sgemm again", sgemm, (a, b)),
    ]
    hlo = with_exps_in_kernel("1", lambda: jax.jit(lambda a, b: fp16x3(a, b)).lower(a, b).compile().as_text())()
    print("fp16x3 lowered with the in-kernel exponents' redo conditional:", " conditional(" in hlo)
    for name, f, args in parts:
        print(f"{name:22s} {ms_per_call(f, *args):8.3f} ms", flush=True)
    same = bool(jnp.array_equal(parts[1][1](a, b), parts[2][1](a, b)))
    print(f"fp16x3 with in-kernel exponents gives the same bits as with the passes: {same}")


if __name__ == "__main__":
    main(*sys.argv[1:])
