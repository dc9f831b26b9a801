"""dot_general dimension numbers: validation and the canonical (B, M, K) x (B, K, N) form.

Every backend computes batched row-major products ``(B, M, K) @ (B, K, N) ->
(B, M, N)``. ``canonicalize`` maps any lax.dot_general operands to that form
(transposes and reshapes, which XLA fuses or makes free), and the result
reshapes to dot_general's output layout (batch dims, lhs free dims, rhs free
dims) with no transpose.
"""
from __future__ import annotations

import math
import operator
from typing import NamedTuple, Sequence, Tuple

import numpy as np


DimensionNumbers = Tuple[Tuple[Tuple[int, ...], Tuple[int, ...]], Tuple[Tuple[int, ...], Tuple[int, ...]]]


class DotShape(NamedTuple):
    """Static facts of one dot_general, derived from shapes and dimension numbers."""
    lhs_perm: Tuple[int, ...]  # lhs axes ordered (batch, free, contracting)
    rhs_perm: Tuple[int, ...]  # rhs axes ordered (batch, contracting, free)
    b: int
    m: int
    k: int
    n: int
    out_shape: Tuple[int, ...]
    rhs_nk_perm: Tuple[int, ...]  # rhs axes ordered (batch, free, contracting): b^T's


def normalize_dimension_numbers(dimension_numbers, lhs_ndim: int, rhs_ndim: int) -> DimensionNumbers:
    """Validate and normalize to tuples of non-negative ints.

    Raises ValueError naming the problem (repeated axes, axes out of range,
    mismatched lengths).
    """
    def axis(d):
        # Integers only, as lax.dot_general: int() would turn 1.5, True or "1"
        # into an axis and silently compute some other product.
        if isinstance(d, (bool, np.bool_)):
            raise TypeError(d)
        return operator.index(d)

    try:
        (lc, rc), (lb, rb) = dimension_numbers
        lc, rc, lb, rb = (tuple(axis(d) for d in x) for x in (lc, rc, lb, rb))
    except (TypeError, ValueError):
        raise ValueError(
            "dimension_numbers must be ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)) "
            f"of integer axes, got {dimension_numbers!r}") from None

    def norm(axes, ndim, what):
        out = []
        for a in axes:
            if not -ndim <= a < ndim:
                raise ValueError(f"dimension_numbers: {what} axis {a} is out of range for an operand of rank {ndim}")
            out.append(a % ndim)
        return tuple(out)

    lc, lb = norm(lc, lhs_ndim, "lhs"), norm(lb, lhs_ndim, "lhs")
    rc, rb = norm(rc, rhs_ndim, "rhs"), norm(rb, rhs_ndim, "rhs")
    if len(lc) != len(rc):
        raise ValueError(f"dimension_numbers: lhs and rhs contracting dims differ in number: {lc} vs {rc}")
    if len(lb) != len(rb):
        raise ValueError(f"dimension_numbers: lhs and rhs batch dims differ in number: {lb} vs {rb}")
    if len(set(lc + lb)) != len(lc + lb):
        raise ValueError(f"dimension_numbers: lhs axes repeat among contracting {lc} and batch {lb}")
    if len(set(rc + rb)) != len(rc + rb):
        raise ValueError(f"dimension_numbers: rhs axes repeat among contracting {rc} and batch {rb}")
    return ((lc, rc), (lb, rb))


def dot_shape(lhs_shape: Sequence[int], rhs_shape: Sequence[int], dimension_numbers) -> DotShape:
    """Check sizes and derive the canonical problem. Raises ValueError on mismatch."""
    lhs_shape, rhs_shape = tuple(lhs_shape), tuple(rhs_shape)
    (lc, rc), (lb, rb) = normalize_dimension_numbers(dimension_numbers, len(lhs_shape), len(rhs_shape))
    for a, b in zip(lc, rc):
        if lhs_shape[a] != rhs_shape[b]:
            raise ValueError(
                f"contracting dimensions differ in size: lhs axis {a} has {lhs_shape[a]}, rhs axis {b} has {rhs_shape[b]} "
                f"(lhs shape {lhs_shape}, rhs shape {rhs_shape})")
    for a, b in zip(lb, rb):
        if lhs_shape[a] != rhs_shape[b]:
            raise ValueError(
                f"batch dimensions differ in size: lhs axis {a} has {lhs_shape[a]}, rhs axis {b} has {rhs_shape[b]} "
                f"(lhs shape {lhs_shape}, rhs shape {rhs_shape})")
    lf = tuple(d for d in range(len(lhs_shape)) if d not in lc and d not in lb)
    rf = tuple(d for d in range(len(rhs_shape)) if d not in rc and d not in rb)
    size = lambda shape, axes: int(math.prod(shape[d] for d in axes))
    out_shape = (tuple(lhs_shape[d] for d in lb) + tuple(lhs_shape[d] for d in lf)
                 + tuple(rhs_shape[d] for d in rf))
    return DotShape(lhs_perm=lb + lf + lc, rhs_perm=rb + rc + rf,
                    b=size(lhs_shape, lb), m=size(lhs_shape, lf), k=size(lhs_shape, lc),
                    n=size(rhs_shape, rf), out_shape=out_shape, rhs_nk_perm=rb + rf + rc)


def rhs_k_minor(ds: DotShape) -> bool:
    """Whether rhs as it is laid out (row-major) is b^T, (B, N, K), with no
    transpose: its axes in (batch, free, contracting) order are in place,
    as for ``x @ y.T`` once emulate folds the transpose into the dot."""
    return ds.rhs_nk_perm == tuple(range(len(ds.rhs_nk_perm)))


def canonicalize(lhs, rhs, ds: DotShape):
    """(lhs, rhs) -> (a: (B, M, K), b: (B, K, N)), with jnp/np transposes and reshapes."""
    return canonical_side(lhs, ds, "lhs"), canonical_side(rhs, ds, "rhs")


def canonical_side(x, ds: DotShape, side: str):
    """One operand of ``canonicalize``: lhs -> (B, M, K), rhs -> (B, K, N)."""
    if side == "lhs":
        return x.transpose(ds.lhs_perm).reshape(ds.b, ds.m, ds.k)
    return x.transpose(ds.rhs_perm).reshape(ds.b, ds.k, ds.n)


def matmul_dimension_numbers(lhs_ndim: int, rhs_ndim: int) -> DimensionNumbers:
    """Dimension numbers of ``lhs @ rhs`` for operands of equal rank >= 2 (batch dims leading)."""
    nb = lhs_ndim - 2
    return (((lhs_ndim - 1,), (rhs_ndim - 2,)), (tuple(range(nb)), tuple(range(nb))))
