"""Loop-invariant operands split once, before the loop.

A scan whose body multiplies by one of the scan's consts (kNN's database in
``lax.map`` over query chunks; k-means' points in ``fori_loop`` over Lloyd
iterations) would split that operand in every iteration: XLA on the GPU
hoists no custom call out of a while loop (scripts/loop_hoist_probe.py;
docs/performance.md, stop 38: kNN's search ran the database's split kernel
4 times). ``emulate`` therefore binds the split itself, as an equation
before the scan (``jaxemu_split``), passes its three arrays in as more
consts, and the body's ``jaxemu_dot`` takes them (``presplit``,
jaxemu/primitive.py). Nothing is computed differently: the product reads
the same slices it would have made (tests/test_hoist.py).

Only where the product would read them: an operand that is one of the
scan's consts as it is (after emulate folds a transpose into the dot), a
concrete multi-slice float scheme on the cuda backend's slice path
(cuda_fused.presplit_pays), or auto (its fp16x3 branch reads fp16x3's
split); no exact operand, no explicit sharding, not backend="xla".
auto's statistics of an invariant B (auto.column_stats: one pass over B
per product, 131 us per chunk of kNN's 1M x 128 database on an H200) are
taken ahead too, with or without its split, also where the other operand
is exact (the k-means update, one-hot^T X, whose test reads X's columns in
every iteration); those of A are not: auto's pass over A also takes the
probe A v, v from B. JAXEMU_CUDA_HOIST_STATS=0 turns that part off
(backends/switches.py). (Decided when
emulate rewrites, before the platform is known: on a platform without the
kernels the split is XLA's and no product reads it, so XLA deletes it; the
compiled CPU program is the same.) Not
yet: while loops, and an operand that the body derives from a const (a
slice, a transpose that does not fold) or that reaches the dot through a
nested jit. JAXEMU_CUDA_HOIST_SPLITS=0 turns it off (backends/switches.py).
kNN's search (8192 x 1M x 128) and k-means (1M x 256, 1024 centres) under
fp16x3 on an H200: 31.6 -> 30.4 ms and 206.5 -> 192.6 ms
(docs/performance.md, stop 39).

Memory: the split lives through the whole loop where it was made and
freed in each iteration (k-means' points split as A and as B: about two
more copies of the points, in 16-bit slices, while the loop runs); auto's
fp16x3 split is made even where auto then refuses fp16x3 in every
iteration. Tangent and cotangent products split for themselves.
"""
from __future__ import annotations

from typing import List, Tuple

from . import _compat, _sharding
from .backends import cuda_fused, switches
from .dims import dot_shape
from .primitive import jaxemu_dot_p, jaxemu_split_p
from .schemes import Auto, FloatSplit, get_scheme

SWITCH = switches.variable("hoist_splits")


def split_scheme(s):
    """The concrete scheme whose split a product of scheme ``s`` reads: its
    own (a float scheme), fp16x3's for auto (its first choice, which its
    fp16x3 branch runs on the split; the other branches split for
    themselves), else None."""
    if isinstance(s, FloatSplit):
        return s
    return get_scheme("fp16x3") if isinstance(s, Auto) else None


def _may_take_work_ahead(eqn) -> bool:
    """What both kinds of work made ahead need of a body's jaxemu_dot: none
    made ahead already, a backend with kernels to read it (not "xla"), no
    literal operand, no explicit sharding (a split of the whole operand is
    not a shard's)."""
    p = eqn.params
    lhs, rhs = eqn.invars
    return (not p["presplit"] and p["backend"] != "xla"
            and not any(isinstance(v, _compat.Literal) for v in (lhs, rhs))
            and _sharding.plan([lhs.aval, rhs.aval], None, p["dimension_numbers"]) is None)


def _side(eqn, consts) -> str:
    """The operand of a body's jaxemu_dot to split ahead ("lhs", "rhs") or ""."""
    p = eqn.params
    s = split_scheme(p["scheme"])
    if s is None or any(p["exact"]) or not _may_take_work_ahead(eqn):
        return ""
    lhs, rhs = eqn.invars
    ds = dot_shape(lhs.aval.shape, rhs.aval.shape, p["dimension_numbers"])
    if not cuda_fused.presplit_pays(s, ds.m, ds.k, ds.n, ds.b):
        return ""
    # Both invariant: the larger one (the other is split once per iteration).
    sides = [side for side, v in (("rhs", rhs), ("lhs", lhs)) if v in consts]
    if len(sides) == 2:
        return "rhs" if ds.n >= ds.m else "lhs"
    return sides[0] if sides else ""


def _stats_ahead(eqn, consts) -> bool:
    """Whether auto's column statistics of the body's jaxemu_dot's B (a
    scan const, not exact) are taken ahead (module docstring)."""
    p = eqn.params
    return (switches.enabled("hoist_stats") and isinstance(p["scheme"], Auto) and not p["exact"][1]
            and _may_take_work_ahead(eqn) and eqn.invars[1] in consts)


def split_invariant_operands(eqn) -> Tuple[List, object]:
    """(equations to run before ``eqn``, ``eqn`` itself or its replacement):
    for a scan, the split of each loop-invariant dot operand of its body,
    and auto's statistics of an invariant B (module docstring); any other
    equation is returned as it is."""
    if eqn.primitive.name != "scan" or not switches.enabled("hoist_splits"):
        return [], eqn
    closed = eqn.params["jaxpr"]
    body = closed.jaxpr
    nc = _compat.scan_num_consts(eqn.params)
    consts = {v: i for i, v in enumerate(body.invars[:nc])}
    ahead, outer_in, body_in, body_eqns = [], [], [], []
    for e in body.eqns:
        split_side = _side(e, consts) if e.primitive is jaxemu_dot_p else ""
        # (auto's statistics of B with B's split or with none: one operand's work per product)
        stats = e.primitive is jaxemu_dot_p and split_side != "lhs" and _stats_ahead(e, consts)
        if not split_side and not stats:
            body_eqns.append(e)
            continue
        side = split_side or "rhs"
        v = e.invars[0 if side == "lhs" else 1]
        p = e.params
        params = dict(side=side, shapes=(tuple(e.invars[0].aval.shape), tuple(e.invars[1].aval.shape)),
                      dimension_numbers=p["dimension_numbers"],
                      scheme=split_scheme(p["scheme"]) if split_side else None,
                      stats=p["scheme"] if stats else None)
        x = eqn.invars[consts[v]]
        outer = [_compat.new_var(a) for a in jaxemu_split_p.abstract_eval(x.aval, **params)[0]]
        inner = [_compat.new_var(a) for a in jaxemu_split_p.abstract_eval(v.aval, **params)[0]]
        # (the dot's equation as a template: its source line, context, no effects)
        ahead.append(e.replace(primitive=jaxemu_split_p, invars=[x], outvars=outer,
                               params=params))
        outer_in += outer
        body_in += inner
        body_eqns.append(e.replace(invars=list(e.invars) + inner, params=dict(p, presplit=side)))
    if not ahead:
        return [], eqn
    # The splits become the scan's first consts.
    new_body = body.replace(invars=body_in + list(body.invars), eqns=body_eqns)
    params = dict(_compat.scan_params_with_consts_first(eqn.params, len(body_in)),
                  jaxpr=closed.replace(jaxpr=new_body))
    return ahead, eqn.replace(invars=outer_in + list(eqn.invars), params=params)
