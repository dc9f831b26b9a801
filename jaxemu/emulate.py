"""emulate(f): run f with every float32 dot_general replaced by jaxemu_dot.

How: trace f to a jaxpr, rewrite it, evaluate the rewritten jaxpr. The
rewrite is structural: a dot_general equation whose operands are float32
becomes a jaxemu_dot equation with the same inputs and outputs (same avals),
and every sub-jaxpr found in an equation's params -- jit, cond/switch
branches, while, scan, remat, custom_jvp/custom_vjp bodies, shard_map -- is
rewritten the same way. So no per-primitive rules are needed for control
flow, and every other equation is left exactly as it was.

custom_jvp / custom_vjp rules are functions that JAX calls only when
differentiating; they are wrapped so that the jaxprs they produce (custom_jvp)
or the code they run (custom_vjp's bwd) are emulated too; likewise
custom_vmap's batching rule and the functions of lax.custom_root (a "hijax"
primitive in jax 0.11). custom_linear_solve's jaxprs sit in a named tuple,
rebuilt field by field.

The native fp32 scheme is no emulation: a dot decided as fp32 (``scheme=
"fp32"``, or a per-dot choice of it) stays the caller's dot_general
equation, its precision raised to HIGHEST where it was unset or DEFAULT
(FP32 arithmetic; on a GPU not TF32), so that on the CPU emulate(f,
scheme="fp32") is f's program, bit for bit. explain reports it as fp32.

Which dots (the precision rule): a float32 x float32 dot_general whose
precision is unset, DEFAULT or HIGHEST -- including every dot made under
``jax.default_matmul_precision("highest")`` / ``("float32")`` -- is
emulated by FP32-class schemes: HIGHEST asks for FP32 accuracy, which they
give. Dots explicitly asking for less or for a particular arithmetic
(precision HIGH, i.e. bf16_3x / tf32, or an algorithm preset) are left as
they are. A scheme below FP32 accuracy (bf16, bf16x3, tf32, fp16,
fp16x3_bitcut, int8_l1..l4) emulates the unset/DEFAULT dots and leaves the
HIGHEST ones in FP32: the caller asked for FP32 there, and jax's own
library code (lstsq, cg's inner products, ...) pins HIGHEST where its
algorithm needs it. ``emulate_pinned=True`` emulates every float32 dot
with the scheme regardless; a per-dot choice (``per_dot``, ``plan``) is
applied as given.

Exact operands: an operand the program builds from bool, int8 or uint8
values (a one-hot matrix: ``jax.nn.one_hot``, ``(labels == ids)``), through
converts, transposes, reshapes, broadcasts, slices, gathers, selects and
jit calls, holds small integers, exact in every slice format. Its dot is
emulated with the scheme's one-slice variant for that operand
(FloatSplit.with_exact): no split of it, and none of the products of its
(zero) lo slices: the same result for fewer slice products (the k-means
update, one-hot^T X: fp16x3 runs 2 products, bf16x6 3). ``explain`` says so.

``explain`` states the rule per dot, and emulate warns (once per emulated
function, NothingEmulatedWarning) when it changes no dot at all.

Rewritten jaxprs are cached per (argument structure, shapes/dtypes, static
arguments, scheme), so calling the emulated function again does not retrace.
"""
from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import _compat, hoist
from .api import check_backend, resolve_scheme
from .primitive import jaxemu_dot_p
from .schemes import NativeFP32, Scheme, SchemeLike, get_scheme


@dataclasses.dataclass(frozen=True)
class DotInfo:
    """One dot_general found in a traced program.

    index: position in program order (depth first), the key of per-dot plans;
      None for dots found lazily in custom_jvp rules.
    path: where it sits, e.g. "jit(loss)/scan/cond[1]".
    lhs, rhs: shapes; dtypes: operand dtypes; dimension_numbers: dot_general's.
    precision: the caller's precision argument (None when not pinned).
    source: the user's source line, when JAX recorded one.
    flops: 2 * batch * M * N * K.
    exact: (lhs, rhs): the operand holds small integers by construction
      (built from bool/int8/uint8 values; module docstring).
    """
    index: Optional[int]
    path: str
    lhs: Tuple[int, ...]
    rhs: Tuple[int, ...]
    dtypes: Tuple[str, str]
    dimension_numbers: Any
    precision: Any
    source: str
    flops: int
    exact: Tuple[bool, bool] = (False, False)


@dataclasses.dataclass(frozen=True)
class DotDecision:
    info: DotInfo
    scheme: Optional[Scheme]  # None: left as dot_general
    reason: str


PerDot = Union[None, Mapping[int, SchemeLike], Callable[[DotInfo], Optional[SchemeLike]]]


class NothingEmulatedWarning(UserWarning):
    """``emulate(f)`` changed no dot of f (the message says why and what to change)."""


def precision_request(precision) -> Tuple[str, str]:
    """What a dot_general's precision param asks for: (kind, label), kind one of
    "default" (unset or DEFAULT: the platform's default arithmetic), "fp32"
    (HIGHEST: FP32 accuracy), "lower" (HIGH: bf16_3x / tf32) or "algorithm"
    (an explicit algorithm preset other than DEFAULT)."""
    if precision is None:
        return "default", "unset"
    if isinstance(precision, (tuple, list)) or isinstance(precision, lax.Precision):
        ps = [p for p in (precision if isinstance(precision, (tuple, list)) else (precision,)) if p is not None]
        ps = [lax.Precision(p) if not isinstance(p, lax.Precision) else p for p in ps]
        if any(p == lax.Precision.HIGH for p in ps):
            return "lower", "HIGH"
        if any(p == lax.Precision.HIGHEST for p in ps):
            return "fp32", "HIGHEST"
        return "default", "DEFAULT"
    name = getattr(precision, "name", str(precision))
    if isinstance(precision, lax.DotAlgorithmPreset) and precision == lax.DotAlgorithmPreset.DEFAULT:
        return "default", "DEFAULT"
    return "algorithm", f"algorithm {name}"


def _flops(lhs_shape, rhs_shape, dn) -> int:
    (lc, rc), (lb, rb) = dn
    k = int(np.prod([lhs_shape[d] for d in lc])) if lc else 1
    lf = [d for d in range(len(lhs_shape)) if d not in lc]
    rf = [d for d in range(len(rhs_shape)) if d not in rc and d not in rb]
    return 2 * k * int(np.prod([lhs_shape[d] for d in lf])) * int(np.prod([rhs_shape[d] for d in rf]))


def _auto_note(info: DotInfo, s) -> str:
    import jax

    from .auto import plan
    from .backends import backend_for
    from .dims import dot_shape
    ds = dot_shape(info.lhs, info.rhs, info.dimension_numbers)
    platform = jax.default_backend()
    pl = plan(ds.b, ds.m, ds.n, ds.k, s, platform, backend_for(s, platform))
    if pl.static:
        return f"auto runs {pl.static} here ({pl.reason}; costs from {pl.cost_source})"
    labels = ", ".join(dict.fromkeys(c.label for c in pl.candidates))
    return f"auto picks among {labels} from the data at run time (costs from {pl.cost_source})"


# ----------------------------------------------------------------------------
# Exact operands: values that are small integers by construction.

_EXACT_DTYPES = (np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.uint8))
# Ops whose result holds only values of their (first / every listed) operand:
# moves, copies, selections. ``convert_element_type`` keeps an integer's value
# in any float format; max/min pick one of their operands' values.
_EXACT_FIRST = frozenset({"transpose", "reshape", "broadcast_in_dim", "squeeze", "expand_dims", "rev", "slice",
                          "dynamic_slice", "copy", "copy_p", "reduce_max", "reduce_min", "neg", "real"})
_EXACT_ALL = frozenset({"concatenate", "max", "min"})
# Calls: primitives that run their body once on the equation's operands
# (its invars are the equation's invars). Not loops: a scan's or while's body
# also runs on what earlier iterations made (a zero initial carry is exact,
# the carry after one step is not).
_CALLS = frozenset({"jit", "pjit", "closed_call", "call", "core_call", "remat2", "checkpoint", "custom_jvp_call",
                    "custom_vjp_call", "custom_vjp_call_jaxpr"})
_CALL_KEYS = ("jaxpr", "call_jaxpr", "fun_jaxpr")  # where a call keeps its body


def _body_arity(v) -> int:
    j = v.jaxpr if isinstance(v, _compat.ClosedJaxpr) else v
    return len(j.invars) if isinstance(j, _compat.Jaxpr) else -1


def _is_exact(v, exact) -> bool:
    """v (a Var or Literal) holds integers of magnitude <= 256."""
    if isinstance(v, _compat.Literal):
        try:
            x = np.asarray(v.val)
            return bool(np.all(np.isfinite(x)) and np.all(x == np.round(x)) and np.all(np.abs(x) <= 256))
        except (TypeError, ValueError):
            return False
    aval = getattr(v, "aval", None)
    if aval is not None and getattr(aval, "dtype", None) in _EXACT_DTYPES:
        return True
    return v in exact


def _keeps_integers(dtype) -> bool:
    """A conversion to ``dtype`` keeps an integer of magnitude <= 256: any
    integer or bool type (wrapped values stay small), a float type of 8 or
    more significand bits (not the float8 / float4 types, which round it)."""
    dt = np.dtype(dtype)
    if not jnp.issubdtype(dt, jnp.inexact):  # (jnp's: it knows ml_dtypes' float8 / float4)
        return True
    return jnp.issubdtype(dt, jnp.floating) and jnp.finfo(dt).nmant >= 7


def _gather_keeps(eqn) -> bool:
    """A gather's out-of-bounds fill (``FILL_OR_DROP``: NaN for floats
    unless given) is not a small integer: only clamped or promised-in-bounds
    gathers, or a small-integer fill, keep the values exact."""
    if "FILL" not in str(eqn.params.get("mode", "")):
        return True
    fill = eqn.params.get("fill_value")
    if fill is None:
        return not jnp.issubdtype(eqn.outvars[0].aval.dtype, jnp.inexact)
    return bool(np.isfinite(fill) and fill == np.round(fill) and abs(fill) <= 256)


def exact_vars(jaxpr, exact_in: Tuple[bool, ...] = ()) -> frozenset:
    """The variables of ``jaxpr`` that hold small integers (|x| <= 256) by
    construction: made from bool/int8/uint8 values by the ops above and by
    calls (jit) whose body makes them so; ``exact_in`` flags the invars."""
    exact = {v for v, e in zip(jaxpr.invars, exact_in) if e}
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        ins = eqn.invars
        if name in _EXACT_FIRST:
            ok = bool(ins) and _is_exact(ins[0], exact)
        elif name == "convert_element_type":
            ok = _is_exact(ins[0], exact) and _keeps_integers(eqn.params["new_dtype"])
        elif name == "gather":
            ok = _is_exact(ins[0], exact) and _gather_keeps(eqn)
        elif name in _EXACT_ALL:
            ok = all(_is_exact(v, exact) for v in ins)
        elif name == "select_n":
            ok = all(_is_exact(v, exact) for v in ins[1:])
        elif name == "pad":
            ok = _is_exact(ins[0], exact) and _is_exact(ins[1], exact)
        else:
            body = next((eqn.params[k] for k in _CALL_KEYS if k in eqn.params), None)
            if name not in _CALLS or body is None or _body_arity(body) != len(ins):
                continue
            inner = body.jaxpr if isinstance(body, _compat.ClosedJaxpr) else body
            inner_exact = exact_vars(inner, tuple(_is_exact(v, exact) for v in ins))
            exact.update(o for o, io in zip(eqn.outvars, inner.outvars) if _is_exact(io, inner_exact))
            continue
        if ok:
            exact.update(eqn.outvars)
    return frozenset(exact)


def _fold_transposes(invars, dimension_numbers, transposes):
    """A dot_general's operands and dimension numbers with each operand that
    a transpose made replaced by the transpose's operand (its axes renamed
    in the dimension numbers), where that leaves the product's output as
    it is (the operand's free axes keep their order). The product then sees
    the array as it lies in memory: ``x @ y.T`` reaches the backends as y
    with K its minor axis, which they split as rows without a transposed
    copy (backends.b_rows_free; kNN's database, docs/performance.md stop 37).
    Nothing is computed differently: the same product of the same values."""
    (lc, rc), (lb, rb) = dimension_numbers
    contract, batch, out = [lc, rc], [lb, rb], list(invars)
    for side, v in enumerate(invars):
        if isinstance(v, _compat.Literal) or v not in transposes:
            continue
        src, perm = transposes[v]
        free = [i for i in range(len(perm)) if i not in contract[side] and i not in batch[side]]
        moved = [perm[i] for i in free]
        if moved != sorted(moved):  # the output's axes would come out in another order
            continue
        out[side] = src
        contract[side] = tuple(perm[i] for i in contract[side])
        batch[side] = tuple(perm[i] for i in batch[side])
    if out == list(invars):
        return invars, dimension_numbers
    return out, ((tuple(contract[0]), tuple(contract[1])), (tuple(batch[0]), tuple(batch[1])))


# precision asking for FP32 arithmetic: what lax.dot_general makes of
# precision=HIGHEST (and jax.default_matmul_precision("float32")), in jax
# 0.10 and 0.11 alike.
_HIGHEST = (lax.Precision.HIGHEST, lax.Precision.HIGHEST)


def _fp32_dot(eqn):
    """A dot_general decided as the native fp32 scheme: the caller's own
    equation (same operands, dimension numbers, preferred_element_type,
    out_sharding), with precision raised to HIGHEST unless it already asks
    for FP32 (HIGHEST, or the F32_F32_F32 algorithm). Why not a jaxemu_dot,
    whose fp32 product is dot_general at HIGHEST too (primitive.impl): the
    transposes emulate folds into it, and its own rules under grad/vmap,
    re-arrange the product, so XLA compiles another program and may sum in
    another order (grad lstsq and optax's muon differed in the last bits on
    a CPU). Left as dot_general, scheme fp32 means FP32 arithmetic (on a GPU:
    not TF32) and, where that is the default (the CPU), changes nothing:
    the same program, bit for bit (tests/test_sweep.py)."""
    prec = eqn.params.get("precision")
    if precision_request(prec)[0] == "fp32" or (
            isinstance(prec, lax.DotAlgorithmPreset) and prec == lax.DotAlgorithmPreset.F32_F32_F32):
        return eqn
    return eqn.replace(params=dict(eqn.params, precision=_HIGHEST))


class _Rewriter:
    """One rewrite pass; records a decision per dot_general it meets."""

    def __init__(self, scheme: Scheme, backend: str, per_dot: PerDot, emulate_pinned: bool):
        self.scheme = scheme
        self.backend = backend
        self.per_dot = per_dot
        self.emulate_pinned = emulate_pinned
        self.decisions: List[DotDecision] = []
        self.categories: List[Optional[str]] = []  # why each dot was left alone (None: emulated)
        self._memo: Dict[int, Any] = {}

    # -- decisions ---------------------------------------------------------
    def decide(self, eqn, path: str, lazy: bool, exact=(False, False)) -> DotDecision:
        lhs, rhs = (v.aval for v in eqn.invars)
        dn = eqn.params["dimension_numbers"]
        prec = eqn.params.get("precision")
        info = DotInfo(index=None if lazy else len(self.decisions), path=path or "<top>",
                       lhs=tuple(lhs.shape), rhs=tuple(rhs.shape),
                       dtypes=(str(lhs.dtype), str(rhs.dtype)), dimension_numbers=dn,
                       precision=prec, source=_compat.source_line(eqn),
                       flops=_flops(lhs.shape, rhs.shape, dn), exact=tuple(exact))
        d, category = self._decide(info, eqn.outvars[0].aval.dtype, lhs.dtype, rhs.dtype, prec)
        if not lazy:
            self.decisions.append(d)
            self.categories.append(category)
        return d

    def _decide(self, info, out_dtype, lhs_dtype, rhs_dtype, prec):
        """(DotDecision, category of a dot left alone or None)."""
        if lhs_dtype != np.float32 or rhs_dtype != np.float32:
            return DotDecision(info, None, f"operands are {lhs_dtype} x {rhs_dtype}, not float32 x float32"), "dtype"
        if out_dtype != np.float32:
            return DotDecision(info, None, f"result dtype is {out_dtype}, not float32"), "dtype"
        kind, label = precision_request(prec)
        if kind in ("lower", "algorithm") and not self.emulate_pinned:
            return DotDecision(info, None, f"precision {label} pinned by the caller (a particular arithmetic, "
                               "not FP32's): left as it is; emulate_pinned=True emulates it"), "pinned"
        s, why, explicit = self.scheme, "default scheme", False
        if self.per_dot is not None:
            if callable(self.per_dot):
                choice, why, explicit = self.per_dot(info), "per_dot callable", True
            elif info.index is not None and info.index in self.per_dot:
                choice, why, explicit = self.per_dot[info.index], "plan", True
            else:
                choice = self.scheme
            if choice is None:
                return DotDecision(info, None, f"{why} chose to leave it"), "per_dot"
            s = _check_fp32_scheme(get_scheme(choice), why)
        if kind == "fp32":
            if s.fp32_class:
                why += f"; precision HIGHEST asks for FP32 accuracy, which {s.name} gives"
            elif explicit or self.emulate_pinned:
                why += f"; precision HIGHEST overridden ({'emulate_pinned=True' if self.emulate_pinned else why})"
            else:
                return DotDecision(info, None, f"precision HIGHEST asks for FP32 accuracy, which {s.name} does "
                                   "not give: left in FP32 (an FP32-class scheme such as bf16x6, fp16x3 or auto "
                                   "emulates it; emulate_pinned=True forces it)"), "highest"
        if isinstance(s, NativeFP32):  # (_fp32_dot)
            why += "; left as the caller's dot_general, in FP32 (precision HIGHEST)"
        if s.family == "auto":
            why += "; " + _auto_note(info, s)
        if any(info.exact):
            sides = " and ".join(n for n, e in zip(("lhs", "rhs"), info.exact) if e)
            if s.family == "float":
                why += (f"; the {sides} holds small integers (built from bool/int8/uint8): one slice, "
                        f"{s.with_exact(*info.exact).num_products} of {s.num_products} products")
        return DotDecision(info, s, why), None

    # -- rewriting ---------------------------------------------------------
    def jaxpr(self, jaxpr, path: str = "", lazy: bool = False, exact_in: Tuple[bool, ...] = ()):
        key = (id(jaxpr), path, lazy, exact_in)
        if key in self._memo:
            return self._memo[key][1]
        exact = exact_vars(jaxpr, exact_in)
        new_eqns, changed = [], False
        transposes = {}  # var -> (operand, permutation) of the transpose that made it
        for eqn in jaxpr.eqns:
            if eqn.primitive is lax.transpose_p and not isinstance(eqn.invars[0], _compat.Literal):
                transposes[eqn.outvars[0]] = (eqn.invars[0], tuple(eqn.params["permutation"]))
            new = self.eqn(eqn, path, lazy, exact, transposes)
            if new is not eqn:  # a rewritten loop: its invariant operands split once, before it
                ahead, new = hoist.split_invariant_operands(new)
                new_eqns.extend(ahead)
            changed |= new is not eqn
            new_eqns.append(new)
        out = jaxpr.replace(eqns=new_eqns) if changed else jaxpr
        self._memo[key] = (jaxpr, out)  # keep jaxpr alive so its id stays unique
        return out

    def closed(self, cj, path, lazy=False, exact_in=()):
        new = self.jaxpr(cj.jaxpr, path, lazy, exact_in)
        return cj if new is cj.jaxpr else cj.replace(jaxpr=new)

    def eqn(self, eqn, path: str, lazy: bool, exact=frozenset(), transposes=None):
        if eqn.primitive is lax.dot_general_p:
            flags = tuple(_is_exact(v, exact) for v in eqn.invars)
            d = self.decide(eqn, path, lazy, flags)
            if d.scheme is None:
                return eqn
            if isinstance(d.scheme, NativeFP32):
                return _fp32_dot(eqn)
            invars, dn = _fold_transposes(eqn.invars, eqn.params["dimension_numbers"], transposes or {})
            params = dict(dimension_numbers=dn, scheme=d.scheme,
                          out_dtype=np.dtype(eqn.outvars[0].aval.dtype), backend=self.backend,
                          out_sharding=eqn.params.get("out_sharding"), exact=flags, presplit="")
            return eqn.replace(primitive=jaxemu_dot_p, params=params, invars=invars)
        sub = f"{path}/{_compat.eqn_label(eqn)}" if path else _compat.eqn_label(eqn)
        call_in = tuple(_is_exact(v, exact) for v in eqn.invars)
        new_params, changed = {}, False
        for k in sorted(eqn.params):
            v = eqn.params[k]
            # A call's body (jit, remat, custom_jvp's function) sees its
            # arguments' exactness; other sub-jaxprs start without it.
            is_body = eqn.primitive.name in _CALLS and k in _CALL_KEYS and _body_arity(v) == len(eqn.invars)
            ein = call_in if is_body else ()
            nv = self.param(k, v, sub + _PARAM_LABELS.get(k, f"/{k}"), lazy, ein)
            changed |= nv is not v
            new_params[k] = nv
        if not changed:
            return eqn
        return eqn.replace(params={k: new_params[k] for k in eqn.params})

    def param(self, key, v, path, lazy, exact_in=()):
        if isinstance(v, _compat.ClosedJaxpr):
            return self.closed(v, path, lazy, exact_in)
        if isinstance(v, _compat.Jaxpr):
            return self.jaxpr(v, path, lazy, exact_in)
        if isinstance(v, (tuple, list)) and v and any(isinstance(x, (_compat.Jaxpr, _compat.ClosedJaxpr)) for x in v):
            new = [self.param(key, x, f"{path}[{i}]", lazy) for i, x in enumerate(v)]
            if all(n is x for n, x in zip(new, v)):
                return v
            # custom_linear_solve's jaxprs are a named tuple (matvec, vecmat, solve, transpose_solve)
            return type(v)(*new) if hasattr(type(v), "_fields") else type(v)(new)
        if _compat.is_wrapped_fun(v):
            return self.wrapped_rule(key, v, path)
        if _compat.is_hi_prim(v):
            return self.hi_prim(v, path, lazy)
        if _compat.is_custom_vmap_rule(v):
            return _EmulatedRule(v, self._emulated)
        return v

    def _emulated(self, fun):
        """``fun`` (arrays in, arrays and static values out) with its dots
        emulated like the program's; no warning of its own."""
        return _emulate(fun, self.scheme, self.backend, None, self.emulate_pinned, warn=False)

    def hi_prim(self, prim, path, lazy):
        """A hijax primitive (jax 0.11): its jaxpr params rewritten, its
        functions of arrays (custom_root's f, solve, tangent_solve) emulated."""
        changes = {}
        for k, v in _compat.hi_prim_params(prim).items():
            if k in _compat.hi_prim_array_functions(prim) and callable(v):
                changes[k] = self._emulated(v)
            elif isinstance(v, (_compat.Jaxpr, _compat.ClosedJaxpr)):
                nv = self.param(k, v, f"{path}/{k}", lazy)
                if nv is not v:
                    changes[k] = nv
        return _compat.replace_hi_prim(prim, changes) if changes else prim

    def wrapped_rule(self, key, fun, path):
        """custom_jvp / custom_vjp rules, called by JAX only under differentiation."""
        if key == "bwd":
            return _compat.wrap_fun(self._emulated(fun.call_wrapped), like=fun)
        rewriter = self

        def rewritten(*args, **kwargs):
            out = fun.call_wrapped(*args, **kwargs)
            return jax.tree_util.tree_map(
                lambda x: rewriter.param(key, x, f"{path}", True),
                out, is_leaf=lambda x: isinstance(x, (_compat.Jaxpr, _compat.ClosedJaxpr)))
        return _compat.wrap_fun(rewritten, like=fun)


class _EmulatedRule:
    """custom_vmap's batching rule, emulated when JAX calls it (under vmap)."""

    def __init__(self, rule, emulated):
        self.rule = rule
        self._call = emulated(rule)
        functools.update_wrapper(self, rule, updated=())

    def __call__(self, *args):
        return self._call(*args)

    def __str__(self):
        return str(self.rule)


# How sub-jaxpr params show in DotInfo.path ("jit(f)/while/body", "cond[1]").
_PARAM_LABELS = {"jaxpr": "", "call_jaxpr": "", "fun_jaxpr": "", "branches": "",
                 "body_jaxpr": "/body", "cond_jaxpr": "/cond", "jvp_jaxpr_fun": "/jvp",
                 "fwd_jaxpr_thunk": "/fwd", "bwd": "/bwd"}


def _is_dynamic(x) -> bool:
    return isinstance(x, (jax.Array, np.ndarray, np.generic)) or _compat.is_tracer(x)


def _key_of(x):
    aval = _compat.typeof(x)
    return (tuple(aval.shape), str(aval.dtype), bool(getattr(aval, "weak_type", False)))


def _static_out(x) -> bool:
    """Output leaves passed through as they are, not staged: Python bools
    (custom_vmap rules return which outputs are batched) and non-numbers.
    Numbers and arrays become arrays, as under jax.jit."""
    return isinstance(x, bool) or not (_is_dynamic(x) or isinstance(x, (int, float, complex)))


def trace_and_rewrite(f, args, kwargs, scheme, backend, per_dot, emulate_pinned):
    """Trace f on (args, kwargs) and rewrite. Returns (closed_jaxpr, output
    template (treedef, static leaves, positions of traced leaves), dynamic
    input leaf positions, rewriter)."""
    leaves, in_tree = jax.tree_util.tree_flatten((args, kwargs))
    dyn = [i for i, x in enumerate(leaves) if _is_dynamic(x)]
    template = {}

    def flat_fn(*dyn_leaves):
        full = list(leaves)
        for i, x in zip(dyn, dyn_leaves):
            full[i] = x
        a, kw = jax.tree_util.tree_unflatten(in_tree, full)
        out_leaves, out_tree = jax.tree_util.tree_flatten(f(*a, **kw))
        traced = [i for i, x in enumerate(out_leaves) if not _static_out(x)]
        template["out"] = (out_tree, [None if i in traced else x for i, x in enumerate(out_leaves)], traced)
        return [out_leaves[i] for i in traced]

    closed = jax.make_jaxpr(flat_fn)(*[leaves[i] for i in dyn])
    rw = _Rewriter(scheme, backend, per_dot, emulate_pinned)
    new = rw.closed(closed, "")
    return new, template["out"], dyn, rw


def _fname(f) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or type(f).__name__


_HOW = {
    "pinned": "emulate_pinned=True emulates dots pinned to precision HIGH (as every dot is under "
              "jax.default_matmul_precision('tensorfloat32')) or to an algorithm preset",
    "highest": "{scheme} is below FP32 accuracy, so dots asking for precision HIGHEST (as every dot does under "
               "jax.default_matmul_precision('highest')) stay FP32: an FP32-class scheme (bf16x6, fp16x3, auto, "
               "...) emulates them, emulate_pinned=True forces {scheme}",
    "dtype": "cast the operands to float32 (only float32 x float32 -> float32 products are emulated)",
    "per_dot": "choose a scheme for them in per_dot / plan",
}


def _nothing_emulated_message(f, rw: "_Rewriter", scheme: Scheme) -> str:
    name = _fname(f)
    if not rw.decisions:
        return (f"jaxemu.emulate({name}): {name} has no dot_general for these arguments, so emulate changes "
                "nothing (it emulates float32 dot_generals: jnp.dot, @, einsum, jnp.linalg's products, ...)")
    counts: Dict[str, int] = {}
    for c in rw.categories:
        counts[c] = counts.get(c, 0) + 1
    why = {"pinned": "pinned by the caller to precision HIGH or an algorithm",
           "highest": f"asking for FP32 accuracy (precision HIGHEST), which {scheme.name} does not give",
           "dtype": "not float32 x float32 -> float32", "per_dot": "left by per_dot / plan"}
    parts = "; ".join(f"{n} {why[c]}" for c, n in counts.items())
    how = "; ".join(_HOW[c].format(scheme=scheme.name) for c in counts)
    return (f"jaxemu.emulate({name}) changes none of its {len(rw.decisions)} dot_general(s): {parts}. "
            f"To change that: {how}. jaxemu.explain({name}, *args) lists them.")


def _emulate(f, scheme, backend, per_dot, emulate_pinned, warn: bool):
    cache: Dict[Any, Any] = {}
    warned = []

    @functools.wraps(f)
    def emulated(*args, **kwargs):
        s = resolve_scheme(scheme)
        be = check_backend(backend)
        leaves, in_tree = jax.tree_util.tree_flatten((args, kwargs))
        key = (in_tree, s, be,
               tuple(_key_of(x) if _is_dynamic(x) else ("static", x) for x in leaves))
        try:
            hash(key)
        except TypeError:
            key = None
        entry = cache.get(key) if key is not None else None
        if entry is None:
            closed, template, dyn, rw = trace_and_rewrite(f, args, kwargs, s, be, per_dot, emulate_pinned)
            entry = (closed, template, dyn)
            if key is not None and not any(_compat.is_tracer(c) for c in closed.consts):
                cache[key] = entry
            if warn and not warned and not any(d.scheme is not None for d in rw.decisions):
                warned.append(True)
                warnings.warn(_nothing_emulated_message(f, rw, s), NothingEmulatedWarning, stacklevel=2)
        closed, (out_tree, out_leaves, traced), dyn = entry
        out = _compat.eval_jaxpr(closed.jaxpr, closed.consts, *[leaves[i] for i in dyn])
        out_leaves = list(out_leaves)
        for i, x in zip(traced, out):
            out_leaves[i] = x
        return jax.tree_util.tree_unflatten(out_tree, out_leaves)

    emulated._jaxemu_cache = cache  # for tests: one entry per distinct signature
    return emulated


def emulate(f: Callable, scheme: Optional[SchemeLike] = None, *, backend: Optional[str] = None,
            per_dot: PerDot = None, plan=None, emulate_pinned: bool = False) -> Callable:
    """Return a function like ``f`` whose float32 dot_generals run emulated.

    Every float32 x float32 dot_general in f -- jnp.dot, @, einsum, matmul,
    tensordot, lax.dot_general, and those inside jax.nn / flax / equinox
    layers, jnp.linalg / jax.scipy solvers and optax optimizers, inside jit,
    cond, switch, while_loop, fori_loop, scan, checkpoint, custom_jvp /
    custom_vjp / custom_vmap functions, custom_linear_solve, custom_root and
    shard_map -- becomes a jaxemu_dot. Other operations are left exactly as
    they are. A dot decided as the native fp32 scheme stays a dot_general,
    at precision HIGHEST (module docstring).

    Which dots: those whose precision is unset, DEFAULT or HIGHEST (e.g. under
    ``jax.default_matmul_precision("highest")``), with an FP32-class scheme;
    a scheme below FP32 accuracy leaves the HIGHEST ones in FP32. Dots pinned
    to precision HIGH or an algorithm preset are left as they are. When no
    dot changes, emulate warns once (NothingEmulatedWarning), saying why.

    Arguments:
      f: the function; pytrees in and out. Array arguments are traced; other
        leaves (Python numbers, strings, ...) are passed through as static.
      scheme: scheme name or Scheme; default: ``jaxemu.default_scheme`` when called.
      backend: "default", "xla" or "cuda".
      per_dot: a mapping {dot index: scheme or None} or a callable
        ``(DotInfo) -> scheme or None`` choosing per dot (None leaves a dot as
        dot_general); ``jaxemu.explain`` lists the dots and their indices.
        A per-dot choice is applied as given, whatever the dot's precision
        (only dots pinned to HIGH or an algorithm need emulate_pinned).
      plan: a ``jaxemu.Plan`` from ``jaxemu.tune`` (per-dot schemes).
      emulate_pinned: emulate every float32 dot with the scheme, whatever its
        precision (HIGH, an algorithm preset, HIGHEST with a scheme below
        FP32 accuracy).

    Returns:
      The emulated function. Use it under ``jax.jit`` for speed.

    Example:
      >>> fast_loss = jax.jit(jaxemu.emulate(loss, scheme="bf16x6"))
      >>> grads = jax.grad(jaxemu.emulate(loss))(params, x)
      >>> with jax.default_matmul_precision("highest"):   # FP32 asked for: still emulated
      ...     y = jax.jit(jaxemu.emulate(kmeans, scheme="fp16x3"))(x)
    """
    if not callable(f):
        raise TypeError(f"emulate: f must be callable, got {type(f).__name__}")
    if scheme is not None:
        _check_fp32_scheme(get_scheme(scheme), "scheme")  # fail early on unknown names
    backend = check_backend(backend) if backend is not None else None
    if plan is not None:
        if per_dot is not None:
            raise ValueError("emulate: give per_dot or plan, not both")
        per_dot = plan.as_per_dot()
    if per_dot is not None and not (callable(per_dot) or isinstance(per_dot, Mapping)):
        raise TypeError(f"emulate: per_dot must be a mapping or a callable, got {type(per_dot).__name__}")
    return _emulate(f, scheme, backend, per_dot, emulate_pinned, warn=True)


def _check_fp32_scheme(s, what: str):
    """emulate rewrites float32 products: an FP64 scheme (ozaki2_f64) cannot
    replace them (its operands and result are float64)."""
    if s.operand_dtype != "float32":
        raise ValueError(f"emulate: {what} {s.name!r} emulates {s.operand_dtype} products, but emulate "
                         "rewrites float32 dot_generals; use a float32 scheme (e.g. 'ozaki2_f32'), or call "
                         f"jaxemu.dot(..., scheme={s.name!r}) on float64 arrays")
    return s


class Explanation(list):
    """A list of DotDecision with a readable table as its str()."""

    def __str__(self):
        if not self:
            return "no dot_general found"
        rows = [("#", "where", "lhs x rhs", "GFLOP", "scheme", "why")]
        for d in self:
            i = d.info
            rows.append((str(i.index), i.path, f"{i.dtypes[0]}{list(i.lhs)} x {i.dtypes[1]}{list(i.rhs)}",
                         f"{i.flops / 1e9:.3g}", d.scheme.name if d.scheme else "-", d.reason))
        w = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        return "\n".join("  ".join(r[c].ljust(w[c]) for c in range(len(r))).rstrip() for r in rows)

    __repr__ = __str__


def explain(f: Callable, *args, scheme: Optional[SchemeLike] = None, backend: Optional[str] = None,
            per_dot: PerDot = None, plan=None, emulate_pinned: bool = False, **kwargs) -> Explanation:
    """List each dot_general that ``emulate(f, ...)`` meets for these arguments:
    where it is, its shapes, and the scheme chosen or why it is left alone.

    Example:
      >>> print(jaxemu.explain(loss, params, x, scheme="fp16x3"))
    """
    if not callable(f):
        raise TypeError(f"explain: f must be callable, got {type(f).__name__}")
    if plan is not None:
        per_dot = plan.as_per_dot()
    s = resolve_scheme(scheme)
    _, _, _, rw = trace_and_rewrite(f, args, kwargs, s, check_backend(backend), per_dot, emulate_pinned)
    return Explanation(rw.decisions)
