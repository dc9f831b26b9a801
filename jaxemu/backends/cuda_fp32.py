"""jaxemu's own FP32 GEMM on the GPU (ffi/fp32.h): the FP32 candidate of
auto's choice on the device (docs/auto.md, "The choice on the device").

XLA's FP32 dot (cuBLAS) cannot read a gate, so where auto chooses on the
device without a conditional, the data that only FP32 takes run this
kernel behind the gate instead: CUDA cores, fused multiply-adds in K
order, FP32's special values by construction. An FP32 dot product per
entry, not cuBLAS's bits, and slower than cuBLAS."""
import jax
import jax.numpy as jnp

from .cuda_fused import Gate


def fp32_product_gated(a, b, gate: Gate, c_in=None):
    """C (L, M, N) = a (L, M, K) b (L, K, N) in FP32 where ``gate`` is open;
    where it is closed C is ``c_in`` (the earlier candidates' C, aliased:
    no copy) or, without one, left unwritten for a later candidate."""
    bsz, m, k = a.shape
    n = b.shape[2]
    if b.shape[:2] != (bsz, k):
        raise ValueError(f"fp32_product_gated: operands of shapes {a.shape} and {b.shape} do not multiply")
    out = jax.ShapeDtypeStruct((bsz, m, n), jnp.float32)
    keep = jnp.zeros((0,), jnp.float32) if c_in is None else c_in
    return jax.ffi.ffi_call("jaxemu_fp32_gated", out, input_output_aliases=None if c_in is None else {3: 0})(
        a.astype(jnp.float32), b.astype(jnp.float32), gate.choice_operand(), keep, run_if=gate.run_if_bits())
