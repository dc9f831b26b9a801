"""The cuda backend's concrete product (see jaxemu.backends): one fused
kernel launch per emulated product (jaxemu/backends/cuda_fused.py,
ffi/fused/), for the multi-slice float schemes on Hopper GPUs.
"""
from __future__ import annotations

import functools

import jax

from . import SplitProduct, register_product
from ..schemes import FloatSplit


@functools.lru_cache(maxsize=None)
def _gpus_supported(ext) -> bool:
    """Every visible CUDA device can run the kernels (Hopper, sm_90)."""
    try:
        devs = jax.devices("cuda")
    except RuntimeError:
        return False
    return bool(devs) and all(d.compute_capability.startswith("9.") for d in devs)


def handles(s) -> bool:
    """Concrete schemes the kernels run: multi-slice float schemes. One-slice
    natives (bf16, fp16, tf32) gain nothing from promotion and cuBLAS runs
    them faster through XLA (measured: docs/performance.md), so they stay on
    the xla backend."""
    return isinstance(s, FloatSplit) and s.slices > 1


def make_product(ext):
    """The concrete product (a (B, M, K), b (B, K, N), scheme) -> c: split,
    one fused kernel launch, FP32 special-value rules (cuda_fused.py)."""
    from .cuda_fused import fused_product

    def product(a, b, s):
        return fused_product(a, b, s)
    return product


def split_product() -> SplitProduct:
    """The fused product in two steps (auto's hybrids split their operands
    once): the kernel's slices, gathered by rows, and its launch without the
    special-value rules."""
    from . import cuda_fused as F
    return SplitProduct(F.split_operands, F.split_rows, F.split_rows,
                        lambda a_split, b_split, s: F.split_product(a_split, b_split, s)[0])


def register(ext) -> None:
    for name, capsule in ext.registrations().items():
        jax.ffi.register_ffi_target(name, capsule, platform="CUDA")
    register_product("cuda", "cuda", make_product(ext),
                     handles=lambda s: handles(s) and _gpus_supported(ext), split_product=split_product())


def gpus_supported(ext) -> bool:
    return _gpus_supported(ext)
