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
or the code they run (custom_vjp's bwd) are emulated too.

Rewritten jaxprs are cached per (argument structure, shapes/dtypes, static
arguments, scheme), so calling the emulated function again does not retrace.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import jax
import numpy as np
from jax import lax

from . import _compat
from .api import check_backend, resolve_scheme
from .primitive import jaxemu_dot_p
from .schemes import Scheme, SchemeLike, get_scheme


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


@dataclasses.dataclass(frozen=True)
class DotDecision:
    info: DotInfo
    scheme: Optional[Scheme]  # None: left as dot_general
    reason: str


PerDot = Union[None, Mapping[int, SchemeLike], Callable[[DotInfo], Optional[SchemeLike]]]


def _pinned(precision) -> bool:
    if precision is None:
        return False
    default = lax.Precision.DEFAULT
    if isinstance(precision, tuple):
        return not all(p is None or p == default for p in precision)
    return precision != default


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


class _Rewriter:
    """One rewrite pass; records a decision per dot_general it meets."""

    def __init__(self, scheme: Scheme, backend: str, per_dot: PerDot, emulate_pinned: bool):
        self.scheme = scheme
        self.backend = backend
        self.per_dot = per_dot
        self.emulate_pinned = emulate_pinned
        self.decisions: List[DotDecision] = []
        self._memo: Dict[int, Any] = {}

    # -- decisions ---------------------------------------------------------
    def decide(self, eqn, path: str, lazy: bool) -> DotDecision:
        lhs, rhs = (v.aval for v in eqn.invars)
        dn = eqn.params["dimension_numbers"]
        prec = eqn.params.get("precision")
        info = DotInfo(index=None if lazy else len(self.decisions), path=path or "<top>",
                       lhs=tuple(lhs.shape), rhs=tuple(rhs.shape),
                       dtypes=(str(lhs.dtype), str(rhs.dtype)), dimension_numbers=dn,
                       precision=prec, source=_compat.source_line(eqn),
                       flops=_flops(lhs.shape, rhs.shape, dn))
        out_dtype = eqn.outvars[0].aval.dtype
        if lhs.dtype != np.float32 or rhs.dtype != np.float32:
            d = DotDecision(info, None, f"operands are {lhs.dtype} x {rhs.dtype}, not float32 x float32")
        elif out_dtype != np.float32:
            d = DotDecision(info, None, f"result dtype is {out_dtype}, not float32")
        elif _pinned(prec) and not self.emulate_pinned:
            d = DotDecision(info, None, f"precision pinned by the caller ({prec}); pass emulate_pinned=True to emulate")
        else:
            s, why = self.scheme, "default scheme"
            if self.per_dot is not None:
                if callable(self.per_dot):
                    choice = self.per_dot(info)
                    why = "per_dot callable"
                else:
                    choice = self.per_dot.get(info.index, self.scheme) if info.index is not None else self.scheme
                    why = "plan" if info.index in self.per_dot else "default scheme"
                if choice is None:
                    d = DotDecision(info, None, f"{why} chose to leave it")
                    if not lazy:
                        self.decisions.append(d)
                    return d
                s = get_scheme(choice)
            if s.family == "auto":
                why += "; " + _auto_note(info, s)
            d = DotDecision(info, s, why)
        if not lazy:
            self.decisions.append(d)
        return d

    # -- rewriting ---------------------------------------------------------
    def jaxpr(self, jaxpr, path: str = "", lazy: bool = False):
        key = (id(jaxpr), path, lazy)
        if key in self._memo:
            return self._memo[key][1]
        new_eqns, changed = [], False
        for eqn in jaxpr.eqns:
            new = self.eqn(eqn, path, lazy)
            changed |= new is not eqn
            new_eqns.append(new)
        out = jaxpr.replace(eqns=new_eqns) if changed else jaxpr
        self._memo[key] = (jaxpr, out)  # keep jaxpr alive so its id stays unique
        return out

    def closed(self, cj, path, lazy=False):
        new = self.jaxpr(cj.jaxpr, path, lazy)
        return cj if new is cj.jaxpr else cj.replace(jaxpr=new)

    def eqn(self, eqn, path: str, lazy: bool):
        if eqn.primitive is lax.dot_general_p:
            d = self.decide(eqn, path, lazy)
            if d.scheme is None:
                return eqn
            params = dict(dimension_numbers=eqn.params["dimension_numbers"], scheme=d.scheme,
                          out_dtype=np.dtype(eqn.outvars[0].aval.dtype), backend=self.backend,
                          out_sharding=eqn.params.get("out_sharding"))
            return eqn.replace(primitive=jaxemu_dot_p, params=params)
        sub = f"{path}/{_compat.eqn_label(eqn)}" if path else _compat.eqn_label(eqn)
        new_params, changed = {}, False
        for k in sorted(eqn.params):
            v = eqn.params[k]
            nv = self.param(k, v, sub + _PARAM_LABELS.get(k, f"/{k}"), lazy)
            changed |= nv is not v
            new_params[k] = nv
        if not changed:
            return eqn
        return eqn.replace(params={k: new_params[k] for k in eqn.params})

    def param(self, key, v, path, lazy):
        if isinstance(v, _compat.ClosedJaxpr):
            return self.closed(v, path, lazy)
        if isinstance(v, _compat.Jaxpr):
            return self.jaxpr(v, path, lazy)
        if isinstance(v, (tuple, list)) and v and any(isinstance(x, (_compat.Jaxpr, _compat.ClosedJaxpr)) for x in v):
            new = [self.param(key, x, f"{path}[{i}]", lazy) for i, x in enumerate(v)]
            return type(v)(new)
        if _compat.is_wrapped_fun(v):
            return self.wrapped_rule(key, v, path)
        return v

    def wrapped_rule(self, key, fun, path):
        """custom_jvp / custom_vjp rules, called by JAX only under differentiation."""
        if key == "bwd":
            emulated = emulate(fun.call_wrapped, self.scheme, backend=self.backend,
                               emulate_pinned=self.emulate_pinned)
            return _compat.wrap_fun(emulated, like=fun)
        rewriter = self

        def rewritten(*args, **kwargs):
            out = fun.call_wrapped(*args, **kwargs)
            return jax.tree_util.tree_map(
                lambda x: rewriter.param(key, x, f"{path}", True),
                out, is_leaf=lambda x: isinstance(x, (_compat.Jaxpr, _compat.ClosedJaxpr)))
        return _compat.wrap_fun(rewritten, like=fun)


# How sub-jaxpr params show in DotInfo.path ("jit(f)/while/body", "cond[1]").
_PARAM_LABELS = {"jaxpr": "", "call_jaxpr": "", "fun_jaxpr": "", "branches": "",
                 "body_jaxpr": "/body", "cond_jaxpr": "/cond", "jvp_jaxpr_fun": "/jvp",
                 "fwd_jaxpr_thunk": "/fwd", "bwd": "/bwd"}


def _is_dynamic(x) -> bool:
    return isinstance(x, (jax.Array, np.ndarray, np.generic)) or _compat.is_tracer(x)


def _key_of(x):
    aval = _compat.typeof(x)
    return (tuple(aval.shape), str(aval.dtype), bool(getattr(aval, "weak_type", False)))


def trace_and_rewrite(f, args, kwargs, scheme, backend, per_dot, emulate_pinned):
    """Trace f on (args, kwargs) and rewrite. Returns (closed_jaxpr, out_tree,
    dynamic leaf positions, rewriter)."""
    leaves, in_tree = jax.tree_util.tree_flatten((args, kwargs))
    dyn = [i for i, x in enumerate(leaves) if _is_dynamic(x)]

    def flat_fn(*dyn_leaves):
        full = list(leaves)
        for i, x in zip(dyn, dyn_leaves):
            full[i] = x
        a, kw = jax.tree_util.tree_unflatten(in_tree, full)
        return f(*a, **kw)

    closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*[leaves[i] for i in dyn])
    out_tree = jax.tree_util.tree_structure(out_shape)
    rw = _Rewriter(scheme, backend, per_dot, emulate_pinned)
    new = rw.closed(closed, "")
    return new, out_tree, dyn, rw


def emulate(f: Callable, scheme: Optional[SchemeLike] = None, *, backend: Optional[str] = None,
            per_dot: PerDot = None, plan=None, emulate_pinned: bool = False) -> Callable:
    """Return a function like ``f`` whose float32 dot_generals run emulated.

    Every float32 x float32 dot_general in f -- jnp.dot, @, einsum, matmul,
    tensordot, lax.dot_general, and those inside jax.nn / flax / equinox
    layers, inside jit, cond, switch, while_loop, fori_loop, scan, checkpoint,
    custom_jvp / custom_vjp functions and shard_map -- becomes a jaxemu_dot.
    Other operations are left exactly as they are.

    Arguments:
      f: the function; pytrees in and out. Array arguments are traced; other
        leaves (Python numbers, strings, ...) are passed through as static.
      scheme: scheme name or Scheme; default: ``jaxemu.default_scheme`` when called.
      backend: "default", "xla" or "cuda".
      per_dot: a mapping {dot index: scheme or None} or a callable
        ``(DotInfo) -> scheme or None`` choosing per dot (None leaves a dot as
        dot_general); ``jaxemu.explain`` lists the dots and their indices.
      plan: a ``jaxemu.Plan`` from ``jaxemu.tune`` (per-dot schemes).
      emulate_pinned: also emulate dots whose precision the caller pinned
        (e.g. ``precision="highest"``); by default they are left alone.

    Returns:
      The emulated function. Use it under ``jax.jit`` for speed.

    Example:
      >>> fast_loss = jax.jit(jaxemu.emulate(loss, scheme="bf16x6"))
      >>> grads = jax.grad(jaxemu.emulate(loss))(params, x)
    """
    if not callable(f):
        raise TypeError(f"emulate: f must be callable, got {type(f).__name__}")
    if scheme is not None:
        get_scheme(scheme)  # fail early on unknown names
    backend = check_backend(backend) if backend is not None else None
    if plan is not None:
        if per_dot is not None:
            raise ValueError("emulate: give per_dot or plan, not both")
        per_dot = plan.as_per_dot()
    if per_dot is not None and not (callable(per_dot) or isinstance(per_dot, Mapping)):
        raise TypeError(f"emulate: per_dot must be a mapping or a callable, got {type(per_dot).__name__}")
    cache: Dict[Any, Any] = {}

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
            closed, out_tree, dyn, _ = trace_and_rewrite(f, args, kwargs, s, be, per_dot, emulate_pinned)
            entry = (closed, out_tree, dyn)
            if key is not None and not any(_compat.is_tracer(c) for c in closed.consts):
                cache[key] = entry
        closed, out_tree, dyn = entry
        out = _compat.eval_jaxpr(closed.jaxpr, closed.consts, *[leaves[i] for i in dyn])
        return jax.tree_util.tree_unflatten(out_tree, out)

    emulated._jaxemu_cache = cache  # for tests: one entry per distinct signature
    return emulated


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
