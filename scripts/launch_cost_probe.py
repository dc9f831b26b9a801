"""What auto's choice costs at small sizes, without any kernel of ours:
a 2048^3 bf16 product (XLA's, ~30 us) alone, followed by k tiny kernels
that depend on each other (8 x 8 dots: what a flag-gated kernel that exits
at once costs in the stream), and followed by a conditional on a value
computed on the device (XLA's predicate crosses to the host). Median ms per
call, calls back to back (jaxemu.bench.time_fn).
  python scripts/launch_cost_probe.py [size]"""
import sys

import jax
import jax.numpy as jnp
from jax import lax

from jaxemu.bench import time_fn

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
key = jax.random.PRNGKey(0)
a = jax.random.uniform(key, (n, n), jnp.float32, -1, 1)
b = jax.random.uniform(jax.random.fold_in(key, 1), (n, n), jnp.float32, -1, 1)


def product(x, y):
    return jnp.dot(x.astype(jnp.bfloat16), y.astype(jnp.bfloat16), preferred_element_type=jnp.float32)


def tiny_chain(k):
    def f(x, y):
        c = product(x, y)
        t = x[:8, :8]
        for _ in range(k):  # each a kernel of its own: a dot does not fuse with the next
            t = jnp.dot(t, t, precision=lax.Precision.HIGHEST)
        return c, t
    return f


def with_cond(x, y):
    s = jnp.max(jnp.abs(x[:8, :8]))
    return lax.cond(s > 0.5, lambda z: z, lambda z: z * 2, product(x, y))


def test_then_product(x, y):  # the predicate before the product, as auto's test
    s = jnp.max(jnp.abs(x[:8, :8]))
    return lax.cond(s > 0.5, product, lambda u, v: product(u, v) * 2, x, y)


cases = {"product": product, **{f"product + {k} tiny kernels": tiny_chain(k) for k in (1, 2, 4, 8)},
         "product, then a conditional": with_cond, "a conditional over the product": test_then_product}
print(jax.devices()[0].device_kind, "jax", jax.__version__, f"{n}^3")
base = None
for name, f in cases.items():
    t = time_fn(jax.jit(f), a, b, 7) * 1e3
    base = base or t
    print(f"{name:32s} {t:8.4f} ms  (+{(t - base) * 1e3:6.1f} us)")
