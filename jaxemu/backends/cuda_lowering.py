"""The cuda backend's concrete product (see jaxemu.backends) on Hopper GPUs:
one fused kernel launch per emulated product for the multi-slice float
schemes (jaxemu/backends/cuda_fused.py, ffi/fused/), and Ozaki II's residue
products on the int8 tensor cores (jaxemu/backends/cuda_int8.py, ffi/int8/).
"""
from __future__ import annotations

import dataclasses

import functools

import jax

from . import SplitProduct, register_gated, register_product, switches
from ..schemes import FloatSplit, Int8Split, Ozaki2


@functools.lru_cache(maxsize=None)
def _gpus_supported(ext) -> bool:
    """Every visible CUDA device can run the kernels (Hopper, sm_90)."""
    try:
        devs = jax.devices("cuda")
    except RuntimeError:
        return False
    return bool(devs) and all(d.compute_capability.startswith("9.") for d in devs)


def handles(s, families=("fused", "int8", "mixpert")) -> bool:
    """Concrete schemes the kernels run: multi-slice float schemes that a
    fused kernel configuration holds ("fused": every catalogue scheme;
    cuda_fused.kernel_tiles) and Ozaki II ("int8"). One-slice natives (bf16,
    fp16, tf32) gain nothing from promotion and cuBLAS runs them faster
    through XLA (measured: docs/performance.md), so they stay on the xla
    backend; MixPert's int8 levels run on the MixPert kernel ("mixpert":
    K-tiles of 32, the catalogue's), custom float schemes no configuration
    holds (4 slices, fp16 with 3) on the xla backend;
    ``jaxemu.backends.backend_for(scheme)`` names the backend that runs a
    scheme (``jaxemu.info()`` lists the catalogue's)."""
    if isinstance(s, FloatSplit):
        from .cuda_fused import kernel_tiles
        return "fused" in families and s.slices > 1 and bool(kernel_tiles(s))
    if isinstance(s, Int8Split):
        from .cuda_mixpert import supports
        return "mixpert" in families and supports(s)
    return isinstance(s, Ozaki2) and "int8" in families


def families(ext) -> tuple:
    """The kernel families the cuda backend uses now: the extension's, less
    "int8" when $JAXEMU_CUDA_INT8 is "0" (switches.py; read at trace time).
    The int8 kernels (ffi/int8/) run Ozaki II by default since
    tests/test_cuda_int8.py passed on an H100 (2026-11-25)."""
    fams = tuple(ext.supported_families())
    if not switches.enabled("int8"):
        fams = tuple(f for f in fams if f != "int8")
    if not switches.enabled("mixpert"):
        fams = tuple(f for f in fams if f != "mixpert")
    return fams


def make_product(ext):
    """The concrete product (a (B, M, K), b (B, K, N), scheme) -> c: for float
    schemes split, one fused kernel launch, FP32 special-value rules
    (cuda_fused.py); for Ozaki II, cuda_int8.py."""
    from .cuda_fused import fused_product
    from .cuda_int8 import ozaki2_product
    from .cuda_mixpert import mixpert_product

    def product(a, b, s, scales=None, fits=False, presplit=(None, None)):
        if isinstance(s, Ozaki2):
            return ozaki2_product(a, b, s)
        if isinstance(s, Int8Split):
            return mixpert_product(a, b, s)
        return fused_product(a, b, s, scales, fits, presplit)
    return product


def split_product() -> SplitProduct:
    """The fused product in two steps (auto's hybrids split their operands
    once): the kernel's slices, gathered by rows, and its launch without the
    special-value rules."""
    from . import cuda_fused as F
    return SplitProduct(F.split_operands, F.split_rows, F.split_rows, F.split_product)


def register(ext) -> None:
    for name, capsule in ext.registrations().items():
        jax.ffi.register_ffi_target(name, capsule, platform="CUDA")
    from . import cuda_stats
    targets = ext.registrations()
    # (an extension built before a kernel lacks its target: that path is then left out)
    stats = None
    if "jaxemu_col_stats" in targets:
        stats = cuda_stats.KERNELS if "jaxemu_fused_split_stats" in targets else \
            dataclasses.replace(cuda_stats.KERNELS, split_rows=None)
    register_product("cuda", "cuda", make_product(ext),
                     handles=lambda s: handles(s, families(ext)) and _gpus_supported(ext),
                     split_product=split_product(), stats=stats)
    if "jaxemu_fp32_gated" in targets:  # (auto's choice on the device: backends.gated_for)
        from . import cuda_gated
        register_gated("cuda", cuda_gated.GATED)


def gpus_supported(ext) -> bool:
    return _gpus_supported(ext)
