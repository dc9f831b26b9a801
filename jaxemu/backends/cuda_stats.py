"""auto's data test on the GPU: the row statistics of one operand in one
pass (ffi/stats), in place of XLA's reductions, which made three to four
fusions of them over A, one writing a mask for the others to read
(docs/performance.md, stop 25). Same statistics (jaxemu/auto.py:
operand_stats); the sums in another order (the test's bounds allow any)."""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp


def row_stats(a, v: Optional[jnp.ndarray] = None):
    """Per row of a (B, R, K) (float32, float16 or bfloat16), over its finite
    values (NaN/Inf count as 0): max |a|, min of the nonzero |a| (inf for
    none), sum |a|; with the probe v (B, K) (float32, finite), of t = a v:
    sum t, sum |t|, max |t|, sum |t|^(1/8). Each (B, R) float32."""
    n = 3 if v is None else 7
    out = jax.ffi.ffi_call("jaxemu_row_stats", jax.ShapeDtypeStruct((n,) + a.shape[:2], jnp.float32))(
        a, jnp.zeros((0,), jnp.float32) if v is None else v.astype(jnp.float32))
    return tuple(out[i] for i in range(n))
