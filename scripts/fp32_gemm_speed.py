"""jaxemu's own FP32 GEMM (ffi/fp32, the fallback auto's choice on the
device runs behind a gate) against cuBLAS SGEMM (jnp.dot, precision
"highest"): median ms per call and the largest difference, one process.
Also counts the copies in the compiled HLO of auto with the choice on the
device (JAXEMU_CUDA_DEVICE_CHOICE=1) at the first shape.
  JAX_PLATFORMS=cuda python scripts/fp32_gemm_speed.py [M ...]"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import jaxemu
from jaxemu.backends.cuda_fp32 import fp32_product_gated
from jaxemu.backends.cuda_fused import Gate
from jaxemu.bench import time_fn

print(jax.devices()[0].device_kind, "jax", jax.__version__)
for i, n in enumerate(int(x) for x in (sys.argv[1:] or ["2048", "4096"])):
    ka, kb = jax.random.split(jax.random.PRNGKey(n))
    a = jax.random.normal(ka, (n, n), jnp.float32)
    b = jax.random.normal(kb, (n, n), jnp.float32)
    ours = jax.jit(lambda a, b: fp32_product_gated(a[None], b[None], Gate(jnp.int32(0), (0,)))[0])
    sgemm = jax.jit(lambda a, b: jnp.dot(a, b, precision="highest"))
    t_ours, t_sgemm = time_fn(ours, a, b, 7) * 1e3, time_fn(sgemm, a, b, 7) * 1e3
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    err = lambda c: float(np.max(np.abs(np.asarray(c, np.float64) - ref)))
    print(f"{n}^3  jaxemu fp32 {t_ours:.4f} ms  sgemm {t_sgemm:.4f} ms  x{t_sgemm / t_ours:.2f} of sgemm's speed"
          f"  max err {err(ours(a, b)):.3g} vs sgemm {err(sgemm(a, b)):.3g}")
    if i == 0:  # (the switch is read when the product is lowered: set for this one only)
        os.environ["JAXEMU_CUDA_DEVICE_CHOICE"] = "1"
        try:
            hlo = jax.jit(lambda a, b: jaxemu.dot(a, b, scheme="auto")).lower(a, b).compile().as_text()
        finally:
            del os.environ["JAXEMU_CUDA_DEVICE_CHOICE"]
        lines = [l for l in hlo.splitlines() if " copy(" in l or "copy-start" in l]
        print(f"auto, choice on device, {n}^3: {len(lines)} copies in the HLO")
        for l in lines[:6]:
            print("  ", l.strip()[:160])
