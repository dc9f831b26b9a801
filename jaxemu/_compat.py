"""Every use of JAX internals, and every difference between the JAX versions
jaxemu supports (0.10.x, 0.11.x), lives here.

Public names are used wherever JAX has them; the few internals (primitive
dispatch, linear_util for custom_jvp/vjp rules, source info for explain(),
config states for the default scheme) are isolated so a JAX upgrade touches
this file alone.
"""
from __future__ import annotations

import jax
from jax.extend import core as jex_core

JAX_VERSION = tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())

Primitive = jex_core.Primitive
Jaxpr = jex_core.Jaxpr
ClosedJaxpr = jex_core.ClosedJaxpr
Literal = jex_core.Literal
ShapedArray = jax.core.ShapedArray


def apply_primitive(prim, *args, **params):
    """Eager evaluation of a primitive by compiling its lowering (the standard
    impl rule of custom primitives)."""
    from jax._src import dispatch
    return dispatch.apply_primitive(prim, *args, **params)


def typeof(x):
    """The abstract value (shape, dtype, weak_type) of an array or tracer."""
    return jax.typeof(x)


def new_var(aval):
    """A fresh jaxpr variable of abstract value ``aval``."""
    return jex_core.Var(aval)


def is_tracer(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def eval_jaxpr(jaxpr, consts, *args):
    """Evaluate an open Jaxpr, binding each primitive under the current trace."""
    return jax.core.eval_jaxpr(jaxpr, consts, *args)


def wrap_fun(fun, like):
    """A linear_util.WrappedFun calling ``fun``, with ``like``'s debug info
    (custom_jvp / custom_vjp rules are passed around as WrappedFuns)."""
    from jax._src import linear_util as lu
    return lu.wrap_init(fun, debug_info=like.debug_info)


def is_wrapped_fun(x) -> bool:
    from jax._src import linear_util as lu
    return isinstance(x, lu.WrappedFun)


def source_line(eqn) -> str:
    """'file.py:123 (function)' of the user code that created an equation, or ''."""
    try:
        from jax._src import source_info_util
        return source_info_util.summarize(eqn.source_info)
    except Exception:  # pragma: no cover - best effort, internal API
        return ""


def eqn_label(eqn) -> str:
    """A short name for a path component: 'jit(f)', 'scan', 'cond', ..."""
    name = eqn.primitive.name
    fname = eqn.params.get("name")
    return f"{name}({fname})" if isinstance(fname, str) else name


def context_state(name: str, default, help: str):
    """A JAX config state usable as a context manager (``with state(v): ...``,
    read with ``state.value``) that is part of jit's cache key and trace
    context, like ``jax.default_matmul_precision``: a function jitted under
    one default scheme is retraced under another."""
    from jax._src import config
    return config.string_or_object_state(name, default, help, include_in_jit_key=True,
                                         include_in_trace_context=True)


def unsharded(aval):
    """The same shape, dtype and weak type, with no sharding or varying axes."""
    return ShapedArray(aval.shape, aval.dtype, weak_type=getattr(aval, "weak_type", False))


def permuted_sharding(aval, axes):
    """The NamedSharding whose dim i is ``aval``'s dim axes[i], or None when
    ``aval`` carries no explicit sharding."""
    sh = getattr(aval, "sharding", None)
    spec = getattr(sh, "spec", None)
    if spec is None or not getattr(sh.mesh, "axis_names", ()):
        return None
    from jax.sharding import NamedSharding, PartitionSpec
    entries = tuple(spec) + (None,) * (aval.ndim - len(tuple(spec)))
    return NamedSharding(sh.mesh, PartitionSpec(*[entries[a] for a in axes]))


def scan_num_consts(params) -> int:
    """How many of a scan equation's operands are its consts (the first)."""
    if "ft_in" in params:  # jax 0.11: (consts, carry, xs) as a flat tree
        return len(list(params["ft_in"].unpack()[0]))
    return params["num_consts"]


def scan_params_with_consts_first(params, n: int) -> dict:
    """A scan equation's params for ``n`` more consts before its own."""
    new = dict(params)
    if "ft_in" in params:
        from jax._src import flattree as ft
        consts, carry, xs = params["ft_in"].unpack()
        new["ft_in"] = ft.pack(((ft.nones(n), consts), carry, xs))
    else:
        new["num_consts"] = params["num_consts"] + n
    if "linear" in params:
        new["linear"] = (False,) * n + tuple(params["linear"])
    return new


def zero_tangent(x):
    """The symbolic zero tangent of primal ``x`` (float0 for integers)."""
    from jax.interpreters import ad
    return ad.Zero(typeof(x).to_tangent_aval())


def transposes_on_first_two(prim, params_of):
    """Let ``prim``'s transpose rules, registered by ``ad.defbilinear`` for
    two operands, take more: the rules see the first two and ``params_of(params)``;
    the others get no cotangent. (JAX keeps two tables of transposes, the
    "fancy" accumulating one since 0.10; both are wrapped.)"""
    from jax._src.interpreters import ad as ad_internal
    for table_name in ("primitive_transposes", "fancy_transposes"):
        table = getattr(ad_internal, table_name, None)
        if table is None or prim not in table:
            continue
        rule = table[prim]

        def wrapped(ct, x, y, *more, _rule=rule, **params):
            out = _rule(ct, x, y, **params_of(params))
            return None if out is None else tuple(out) + (None,) * len(more)
        table[prim] = wrapped


# ----------------------------------------------------------------------------
# Higher-order primitives whose sub-programs are not jaxprs in their params.

def is_hi_prim(x) -> bool:
    """A "hijax" primitive object (jax >= 0.11: the ``_prim`` param of
    call_hi_primitive, e.g. lax.custom_root's CustomRoot)."""
    return _HI_PRIM is not None and isinstance(x, _HI_PRIM)


def _hi_prim_class():
    try:
        from jax._src import hijax
    except ImportError:
        return None
    return getattr(hijax, "HiPrim", None)  # jax 0.10 has hijax without it


_HI_PRIM = _hi_prim_class()


# Params of hijax primitives that are functions of arrays (pytrees in, pytrees
# out), by class name: emulate wraps them. Others (remat policies, ...) are
# left alone.
_HI_PRIM_ARRAY_FUNCTIONS = {
    "CustomRoot": ("f", "solve", "tangent_solve"),
    "_RootLinearMap": ("f",),
}


def hi_prim_array_functions(prim):
    return _HI_PRIM_ARRAY_FUNCTIONS.get(type(prim).__name__, ())


def hi_prim_params(prim) -> dict:
    return dict(prim.params)


def replace_hi_prim(prim, changes: dict):
    """A copy of hijax primitive ``prim`` with some params replaced."""
    import copy
    new = copy.copy(prim)
    new.params = dict(prim.params, **changes)
    new.__dict__.update(changes)
    return new


def is_custom_vmap_rule(x) -> bool:
    """custom_vmap_call's ``rule`` param (custom_batching.ClosedRule)."""
    return isinstance(x, _CLOSED_RULE)


def _closed_rule_class():
    from jax._src import custom_batching
    return custom_batching.ClosedRule


_CLOSED_RULE = _closed_rule_class()
