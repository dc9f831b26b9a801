"""The cuda backend's concrete product (see jaxemu.backends): the same
splits and special-value handling as the xla backend, with the slice products
computed by jaxemu's promoted tensor-core GEMMs (ffi/gemm_sm90.cuh) through
XLA FFI calls.

Per magnitude level of a float scheme (smallest first) one GEMM of the
K-concatenated slices runs with partial sums promoted to FP32 every kc
K-steps; its epilogue scales the level by 2^(-sb * level) (exact) and adds
the levels already summed (beta = 1), so the levels meet in FP32, smallest
first, as in the xla backend.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from . import register_product, xla
from ..schemes import FloatSplit

_DTYPES = {"bf16": jnp.bfloat16, "fp16": jnp.float16, "tf32": jnp.float32}


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def promotion_steps(kc, tile_k: int) -> int:
    """The kernels promote every multiple of their tile K: kc rounded down to
    one (at least one tile), or 0 (only at the end) for kc=None."""
    if kc is None:
        return 0
    return max(tile_k, (kc // tile_k) * tile_k)


def make_level_sum(ext):
    def level_sum(a_sl, b_sl, s: FloatSplit, platform: str):
        tk = int(ext.tile_k(s.fmt))
        promote = promotion_steps(s.kc, tk)
        bsz, m, k = a_sl[0].shape
        n = b_sl[0].shape[2]
        # Each term's K is padded to a whole number of promotion chunks (zeros
        # meet zeros), so no chunk straddles two terms; N to 16-byte rows.
        kp = _round_up(k, promote or tk)
        npad = _round_up(n, 4)
        dt = _DTYPES[s.fmt]
        a_sl = [jnp.pad(x, ((0, 0), (0, 0), (0, kp - k))).astype(dt) for x in a_sl]
        b_sl = [jnp.pad(jnp.swapaxes(x, 1, 2), ((0, 0), (0, npad - n), (0, kp - k))).astype(dt) for x in b_sl]
        out = jax.ShapeDtypeStruct((bsz, m, npad), jnp.float32)
        c = None
        for lvl, terms in s.levels:
            a_cat = jnp.concatenate([a_sl[i] for i, _ in terms], axis=2)
            b_cat = jnp.concatenate([b_sl[j] for _, j in terms], axis=2)
            attrs = dict(promote_k=np.int64(promote), alpha=np.float32(2.0 ** (-s.lo_scale_bits * lvl)))
            if c is None:
                c = jax.ffi.ffi_call(f"jaxemu_gemm_{s.fmt}", out)(a_cat, b_cat, beta=np.float32(0), **attrs)
            else:
                c = jax.ffi.ffi_call(f"jaxemu_gemm_acc_{s.fmt}", out, input_output_aliases={2: 0})(
                    a_cat, b_cat, c, beta=np.float32(1), **attrs)
        return c[:, :, :n]
    return level_sum


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
    """The concrete product (a (B, M, K), b (B, K, N), scheme) -> c: the xla
    backend's split and special-value code around the kernels' level sums."""
    level_sum = make_level_sum(ext)

    def product(a, b, s):
        return xla.canonical_dot(a, b, s, "cuda", level_sum)
    return product


def register(ext) -> None:
    for name, capsule in ext.registrations().items():
        jax.ffi.register_ffi_target(name, capsule, platform="CUDA")
    register_product("cuda", "cuda", make_product(ext),
                     handles=lambda s: handles(s) and _gpus_supported(ext))


def gpus_supported(ext) -> bool:
    return _gpus_supported(ext)
