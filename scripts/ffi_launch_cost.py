"""What one launch costs when a call is bound by its launches (stop 60:
auto at 2048^3 leaves the GPU idle 60-70 % of its call, with the
conditional or with the choice on the device): chains of N gated products
whose gate is closed (each kernel returns at once: ~1-3 us on the GPU), so
the time per call over N is the host's cost per product, against a chain
of N dependent tiny XLA ops. Median ms per call, calls back to back.
  JAX_PLATFORMS=cuda python scripts/ffi_launch_cost.py [size]"""
import sys

import jax
import jax.numpy as jnp
from jax import lax

from jaxemu.backends import cuda_gated
from jaxemu.backends.cuda_fp32 import fp32_product_gated
from jaxemu.backends.cuda_fused import Gate
from jaxemu.bench import time_fn

n = int(sys.argv[1]) if len(sys.argv) > 1 else 256
key = jax.random.PRNGKey(0)
a = jax.random.uniform(key, (1, n, n), jnp.float32, -1, 1)
b = jax.random.uniform(jax.random.fold_in(key, 1), (1, n, n), jnp.float32, -1, 1)


def chain(kind, length):
    def f(a, b):
        choice = jnp.int32(0)  # every gate below opens only for choice 1: closed
        c = fp32_product_gated(a, b, Gate(choice, (0,)))  # one open product makes C
        for _ in range(length):
            if kind == "fp32":
                c = fp32_product_gated(a, b, Gate(choice, (1,)), c_in=c)
            elif kind == "xla":  # a dependent tiny op XLA cannot merge with the next
                c = lax.optimization_barrier(c.at[0, 0, 0].add(1.0))
            else:  # a float scheme's gated product: two splits, the GEMM, its fix-up
                c = cuda_gated.product(a, b, kind, choice, 1, c_in=c)
        return c
    return jax.jit(f)


print(jax.devices()[0].device_kind, "jax", jax.__version__, f"operands {n}^3")
for kind in ("xla", "fp32", "fp16x3", "bf16x6"):
    t = {length: time_fn(chain(kind, length), a, b, 9) * 1e3 for length in (0, 8, 32)}
    per = (t[32] - t[0]) / 32 * 1e3
    print(f"{kind:7s} chain of 0 / 8 / 32 closed: {t[0]:.4f} / {t[8]:.4f} / {t[32]:.4f} ms  "
          f"-> {per:.1f} us per product")
