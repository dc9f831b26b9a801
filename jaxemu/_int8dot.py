"""Exact int8 x int8 -> int32 products through XLA's dot_general, with the
contracting dimension zero-padded to a multiple of 16.

Why: on an H100 (jax 0.11.2, CUDA 13 plugin, 2026-11-25) XLA's int8
dot_general with preferred_element_type=int32 returned wrong products for
some contracting sizes that are not multiples of 16 (K = 17 at 1 x 7 x 8,
K = 33 at 9 x 128 x 256 and 2 x 300 x 260: every entry wrong, checked
against numpy's int64 product), while multiples of 16 were exact
(tests/test_cuda_int8.py sweeps K on the GPU). Zeros add nothing to the
product, so padding changes no result on any platform.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

PAD_K = 16


def pad_axis(x, axis: int, multiple: int):
    """x with zeros appended along ``axis`` up to a multiple of ``multiple``."""
    pad = (-x.shape[axis]) % multiple
    if not pad:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, pad)
    return jnp.pad(x, widths)


def int8_dot_general(lhs, rhs, dimension_numbers):
    """``lax.dot_general(lhs, rhs, dimension_numbers,
    preferred_element_type=int32)`` for int8 operands with one contracting
    dimension each, that dimension padded to a multiple of PAD_K."""
    (lc, rc), _ = dimension_numbers
    if len(lc) != 1 or len(rc) != 1:
        raise ValueError(f"int8_dot_general: one contracting dimension per operand, got {lc} and {rc}")
    lhs, rhs = pad_axis(lhs, lc[0], PAD_K), pad_axis(rhs, rc[0], PAD_K)
    return lax.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=jnp.int32)
