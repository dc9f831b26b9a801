"""How jaxemu_dot runs on operands with explicit shardings (jax.sharding
explicit axes, "sharding in types").

The emulation reshapes and splits its operands, which XLA's partitioner cannot
always follow without gathering them, and the CUDA kernels are opaque custom
calls that it would replicate. So when the operands carry shardings, the
lowering runs the emulated product per shard under shard_map: batch and free
dims keep their shardings, and mesh axes that shard a contracting dim give
local products summed by a psum in FP32 -- exactly what dot_general's own
partitioning does, with no operand gathered.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Sequence, Tuple

from jax.sharding import PartitionSpec


class ShardPlan(NamedTuple):
    mesh: object
    lhs_spec: PartitionSpec
    rhs_spec: PartitionSpec
    out_spec: PartitionSpec
    reduce_axes: Tuple[str, ...]


def _spec(aval, ndim):
    sh = getattr(aval, "sharding", None)
    spec = getattr(sh, "spec", None)
    if spec is None:
        return None, None
    entries = tuple(spec) + (None,) * (ndim - len(tuple(spec)))
    return sh.mesh, entries


def _axes(entry) -> Tuple[str, ...]:
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, tuple) else (entry,)


def plan(avals_in: Sequence, avals_out: Optional[Sequence], dimension_numbers) -> Optional[ShardPlan]:
    """A shard_map plan when some operand axis is sharded on a mesh, else None.

    Returns None too when the requested output sharding differs from the one
    the operands imply (XLA then partitions the plain lowering).
    """
    lhs, rhs = avals_in
    lmesh, ls = _spec(lhs, len(lhs.shape))
    rmesh, rs = _spec(rhs, len(rhs.shape))
    if ls is None or rs is None or not any(_axes(e) for e in ls + rs):
        return None
    if lmesh is not rmesh and lmesh != rmesh:
        return None
    (lc, rc), (lb, rb) = dimension_numbers
    reduce_axes = []
    for a, b in zip(lc, rc):
        if ls[a] != rs[b]:
            return None  # differently sharded contracting dims: let XLA decide
        reduce_axes += list(_axes(ls[a]))
    for a, b in zip(lb, rb):
        if ls[a] != rs[b]:
            return None
    lf = [d for d in range(len(ls)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rs)) if d not in rc and d not in rb]
    out = tuple(ls[d] for d in lb) + tuple(ls[d] for d in lf) + tuple(rs[d] for d in rf)
    used = [ax for e in out for ax in _axes(e)]
    if len(used) != len(set(used)) or set(used) & set(reduce_axes):
        return None
    out_spec = PartitionSpec(*out)
    if avals_out is not None:
        _, want = _spec(avals_out[0], len(out))
        if want is not None and tuple(want) != out:
            return None
    return ShardPlan(lmesh, PartitionSpec(*ls), PartitionSpec(*rs), out_spec, tuple(reduce_axes))
