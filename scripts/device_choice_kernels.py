"""Each kernel's GPU time in auto's choice on the device against fp16x3 at
one shape: run under ncu (gpu__time_duration) to see which gated kernels
cost what when their gate is closed.
  JAXEMU_CUDA_DEVICE_CHOICE=1 ncu --metrics gpu__time_duration.sum \
    python scripts/device_choice_kernels.py [auto|fp16x3] [M]"""
import sys

import jax
import jax.numpy as jnp

import jaxemu

scheme = sys.argv[1] if len(sys.argv) > 1 else "auto"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
ka, kb = jax.random.split(jax.random.PRNGKey(0))
a = jax.random.normal(ka, (n, n), jnp.float32)
b = jax.random.normal(kb, (n, n), jnp.float32)
f = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme=scheme))
for _ in range(2):
    f(a, b).block_until_ready()
