"""The cuda backend's products behind a gate (backends.GatedProduct), for
auto's choice on the device (docs/auto.md, "The choice on the device"):
the float schemes on the slice path (the split kernels and the fused GEMM
with its fix-up, each reading the gate: cuda_fused.Gate) and jaxemu's own
FP32 GEMM (cuda_fp32.py), C passed from one candidate's GEMM to the next
through aliased buffers."""
from ..schemes import FloatSplit, NativeFP32, get_scheme
from . import GatedProduct
from . import cuda_fused as F
from .cuda_fp32 import fp32_product_gated

_FP32_MAX_BATCH = 65535  # ffi/fp32_dispatch.cu: the grid's z and y limits
_FP32_MAX_ROW_TILES = 65535


def runs(scheme, shape) -> bool:
    """Whether ``product`` can run concrete ``scheme`` at (B, M, N, K): a
    float scheme the slice path's kernels hold (also where the backend
    would take the FP32-operand kernel, whose fix-up reads no gate: the
    gated product runs the slice path), no exact operand, one launch
    without K-splits (C written whole), FP32's special values on the
    device (JAXEMU_CUDA_DEVICE_SPECIALS not "0": cuda_fused.device_specials);
    FP32 within its grid's limits."""
    b, m, n, k = shape
    s = get_scheme(scheme)
    if isinstance(s, NativeFP32):
        return b <= _FP32_MAX_BATCH and -(-m // 128) <= _FP32_MAX_ROW_TILES
    if not isinstance(s, FloatSplit) or any(s.exact) or not F.kernel_tiles(s) or not F.device_specials(s, m, k, n, b):
        return False
    return F.launch_config(m, n, F.padded_k(k, s), b, s, F.sm_count()).splits == 1


def product(a, b, scheme, choice, index: int, c_in=None, scales=None):
    """``scheme``'s product where ``choice`` == ``index`` (backends.GatedProduct)."""
    s = get_scheme(scheme)
    gate = F.Gate(choice, (index,))
    if isinstance(s, NativeFP32):
        return fp32_product_gated(a, b, gate, c_in)
    kp = F.padded_k(a.shape[2], s)
    ea, eb = scales if scales is not None and s.scaling == "row" else (None, None)
    a_split = F.slices_kernel(a, s, kp, e=ea, gate=gate)
    b_split = F.slices_kernel(b, s, kp, transposed=True, e=eb, gate=gate)
    return F.split_product(a_split, b_split, s, specials=(a, b, False), gate=gate, c_in=c_in)


GATED = GatedProduct(runs, product)
