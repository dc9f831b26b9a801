"""Where the short-K products (k-means distances, kNN) lose their time (GPU):
the write rate of C alone, cuBLAS's GEMMs that write the same FP32 C, and the
fused kernel with fp16x3 and bf16x3 (its own tile choice), all in one
process (same-run times).

    JAX_PLATFORMS=cuda python scripts/store_probe.py 1x8192x128x262144 1x1048576x256x1024
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import jaxemu  # noqa: E402
from jaxemu.testing import median_time  # noqa: E402


def main():
    for spec in sys.argv[1:] or ["1x8192x128x262144"]:
        _, m, k, n = (int(x) for x in spec.split("x"))
        rng = np.random.default_rng(0)
        a = jax.device_put(rng.uniform(-1, 1, (m, k)).astype(np.float32))
        b = jax.device_put(rng.uniform(-1, 1, (k, n)).astype(np.float32))
        gbytes = m * n * 4 / 1e9
        cases = {
            "write C only (broadcast add)": lambda x, y: x[:, :1] + y[:1, :],
            "SGEMM (highest)": lambda x, y: jnp.matmul(x, y, precision="highest"),
            "XLA default (TF32)": lambda x, y: jnp.matmul(x, y),
            "cuBLAS fp16 in, f32 out": lambda x, y: jnp.matmul(x.astype(jnp.float16), y.astype(jnp.float16),
                                                              preferred_element_type=jnp.float32),
        }
        for scheme in ("fp16x3", "bf16x3"):
            cases[f"jaxemu {scheme}"] = lambda x, y, s=scheme: jaxemu.matmul(x, y, scheme=s, backend="cuda")
        print(f"== {spec}: C is {gbytes:.1f} GB")
        base = None
        for name, f in cases.items():
            t = median_time(lambda f=jax.jit(f): f(a, b), repeats=5)
            base = base or t
            print(f"{name:32s} {t * 1e3:8.3f} ms  {gbytes / t / 1e3:6.2f} TB/s of C  {base / t:5.2f}x write-only")


if __name__ == "__main__":
    main()
