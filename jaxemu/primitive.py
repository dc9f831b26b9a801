"""The ``jaxemu_dot`` primitive: an emulated dot_general that JAX can
transform (jit, vmap, jvp/grad/transpose) and lower per platform.

Sections, in the order of jax/_src/lax/linalg.py: bind wrapper -> shape rule
-> batching -> differentiation -> lowerings -> registrations.

Params (all hashable):
  dimension_numbers: lax.dot_general's, normalized to tuples of ints.
  scheme: a jaxemu Scheme.
  out_dtype: result dtype (float32, or bfloat16/float16: computed in f32, then cast).
  backend: "default" (the platform's best: CUDA kernels where built and
    supported, else the xla backend) or "xla" (always plain JAX).
  out_sharding: as lax.dot_general's (explicit-sharding meshes), or None.
  exact: (lhs, rhs) bools: the operand holds small integers (converted from
    bool/int8/uint8: jaxemu.emulate proves it from the program), so a float
    scheme takes it as one slice (FloatSplit.with_exact): the same result,
    fewer slice products. Its tangent is zero; the other operand's is not,
    so the rules below keep the flag on the side it belongs to.
  presplit: "" or "lhs" / "rhs": work on that operand made ahead by the
    ``jaxemu_split`` primitive (below) follows the two operands as more
    operands (``_ahead``): its split (slices, row exponents, max |x|:
    cuda_fused.presplit_operand), then, for auto and B only, auto's column
    statistics of it (auto.column_stats): AHEAD_COUNTS arrays. emulate binds
    it for a scan's loop-invariant operand (jaxemu/hoist.py), so that work
    runs once, outside the loop. A hint about work, never about values:
    the product is the same with or without it, backends that cannot use
    it ignore it, and the rules below drop it wherever the operand it
    belongs to changes (batching, tangents, cotangents).
Operands are float32 (the public API promotes bf16/f16 exactly).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.interpreters import ad, batching, mlir

from . import _compat, _sharding, auto, backends
from .backends import cuda_fused
from .dims import canonical_side, canonicalize, dot_shape, rhs_k_minor
from .schemes import NativeFP32, exact_variant

BACKENDS = ("default", "xla", "cuda")
# The arrays made ahead (``presplit``): an operand's split (slices, row
# exponents, max |x|: cuda_fused.presplit_shapes), auto's column statistics
# of B (auto.column_stats), or the split then the statistics.
SPLIT_ARRAYS, STATS_ARRAYS = 3, 4
AHEAD_COUNTS = {"lhs": (SPLIT_ARRAYS,), "rhs": (SPLIT_ARRAYS, STATS_ARRAYS, SPLIT_ARRAYS + STATS_ARRAYS)}

jaxemu_dot_p = _compat.Primitive("jaxemu_dot")


def bind(lhs, rhs, *split, dimension_numbers, scheme, out_dtype, backend, out_sharding=None, exact=(False, False),
         presplit=""):
    """Bind the primitive (operands already validated and float32; ``split``:
    the work on the ``presplit`` operand made ahead, from ``jaxemu_split``)."""
    if (presplit not in ("", "lhs", "rhs") or bool(presplit) != bool(split)
            or (split and len(split) not in AHEAD_COUNTS[presplit])):
        raise ValueError(f"jaxemu_dot: presplit={presplit!r} with {len(split)} arrays made ahead")
    return jaxemu_dot_p.bind(lhs, rhs, *split, dimension_numbers=dimension_numbers, scheme=scheme,
                             out_dtype=np.dtype(out_dtype), backend=backend, out_sharding=out_sharding,
                             exact=(bool(exact[0]), bool(exact[1])), presplit=presplit)


# ----------------------------------------------------------------------------
# Shape rule: exactly dot_general's (shape, sharding, varying manual axes).

def _abstract_eval(lhs, rhs, *split, dimension_numbers, scheme, out_dtype, backend, out_sharding, exact, presplit):
    out, _effects = lax.dot_general_p.abstract_eval(
        lhs, rhs, dimension_numbers=dimension_numbers, precision=None,
        preferred_element_type=np.dtype(out_dtype), out_sharding=out_sharding)
    return out


# ----------------------------------------------------------------------------
# Batching: fold the vmapped axis into a batch dimension (both operands
# mapped) or a free dimension (one operand mapped), as lax.dot_general does.
# Never a loop over examples.

def _shift(axes, by=1):
    return tuple(a + by for a in axes)


def _batch_rule(args, dims, *, dimension_numbers, out_sharding, presplit, **params):
    # (An explicit out_sharding names the unbatched result's axes; under vmap
    # the result gains an axis, so sharding is left to propagation.)
    # A split made ahead stays where its operand is not mapped: the mapped
    # axis joins the other operand's axes, and this one's canonical form is
    # unchanged. (jaxemu_split's own rule never maps its outputs.)
    lhs, rhs, split = args[0], args[1], args[2:]
    lbd, rbd = dims[:2]
    if presplit and (lbd if presplit == "lhs" else rbd) is not None:
        presplit, split = "", ()
    params = dict(params, presplit=presplit)
    (lc, rc), (lb, rb) = dimension_numbers
    nb = len(lb)
    if lbd is None and rbd is None:  # (only a split was mapped, which its rule never does: drop it)
        return bind(lhs, rhs, dimension_numbers=dimension_numbers, **dict(params, presplit="")), None
    if lbd is not None and rbd is not None:
        lhs = jnp.moveaxis(lhs, lbd, 0)
        rhs = jnp.moveaxis(rhs, rbd, 0)
        dn = ((_shift(lc), _shift(rc)), ((0,) + _shift(lb), (0,) + _shift(rb)))
        return bind(lhs, rhs, *split, dimension_numbers=dn, **params), 0
    if lbd is not None:
        # The mapped axis becomes lhs's first free dim: in the output it follows
        # the batch dims.
        lhs = jnp.moveaxis(lhs, lbd, 0)
        dn = ((_shift(lc), rc), (_shift(lb), rb))
        return bind(lhs, rhs, *split, dimension_numbers=dn, **params), nb
    rhs = jnp.moveaxis(rhs, rbd, 0)
    dn = ((lc, _shift(rc)), (lb, _shift(rb)))
    n_lhs_free = lhs.ndim - len(lc) - nb
    return bind(lhs, rhs, *split, dimension_numbers=dn, **params), nb + n_lhs_free


# ----------------------------------------------------------------------------
# Differentiation: the op is bilinear. The cotangent of one operand is itself
# a dot_general of the output cotangent with the other operand, emulated with
# the same scheme.

def _ranges(*lengths):
    out, start = [], 0
    for n in lengths:
        out.append(tuple(range(start, start + n)))
        start += n
    return out


def _kept(ndim, *excluded):
    drop = set().union(*map(set, excluded))
    return tuple(d for d in range(ndim) if d not in drop)


def _cotangent(g, other, this_aval, this_dims, other_dims, this_is_lhs, params):
    """Cotangent of the operand ``this`` given g (output cotangent) and ``other``.

    g's axes are (batch, lhs kept, rhs kept). Contract g's axes of other's
    kept dims with other's kept dims, batch over batch: the result's axes are
    (batch, this kept, other's contracting dims in increasing order), which
    map back to this operand's (batch, kept, contracting-paired-by-other) axes.
    """
    this_c, this_b = this_dims
    other_c, other_b = other_dims
    this_ndim = this_aval.ndim
    this_kept = _kept(this_ndim, this_c, this_b)
    other_kept = _kept(other.ndim, other_c, other_b)
    if this_is_lhs:
        g_batch, _, g_other = _ranges(len(this_b), len(this_kept), len(other_kept))
    else:
        g_batch, g_other, _ = _ranges(len(this_b), len(other_kept), len(this_kept))
    dn = ((g_other, other_kept), (g_batch, other_b))
    this_c_by_other = [this_c[i] for i in np.argsort(other_c)]
    src_axes = list(this_b) + list(this_kept) + this_c_by_other
    # The cotangent takes its operand's sharding (as in lax.dot_general's rule):
    # needed on explicit meshes when the contraction runs over sharded axes.
    # g is not exact; `other` keeps its flag, now on the rhs.
    exact = params["exact"][1 if this_is_lhs else 0]
    params = dict(params, out_sharding=_compat.permuted_sharding(this_aval, src_axes), exact=(False, exact),
                  presplit="")
    # float32, or float64 for an FP64 scheme: the dtype of the operands.
    out = bind(g.astype(other.dtype), other, dimension_numbers=dn, **params)
    return jnp.transpose(out, tuple(np.argsort(src_axes)))


def _aval(x):
    # The operand being transposed arrives as an undefined primal (or, in
    # newer JAX, an accumulator); both carry an aval.
    aval = getattr(x, "aval", None)
    return aval if aval is not None else _compat.typeof(x)


def _transpose_lhs(g, lhs, rhs, *, dimension_numbers, **params):
    (lc, rc), (lb, rb) = dimension_numbers
    return _cotangent(g, rhs, _aval(lhs), (lc, lb), (rc, rb), True, params)


def _transpose_rhs(g, lhs, rhs, *, dimension_numbers, **params):
    (lc, rc), (lb, rb) = dimension_numbers
    return _cotangent(g, lhs, _aval(rhs), (rc, rb), (lc, lb), False, params)


# ----------------------------------------------------------------------------
# Lowerings. One rule per platform runs ``impl`` (plain JAX around the
# backends' concrete products, jaxemu.backends); the product is looked up when
# a function is lowered, so a backend registered after this module (the CUDA
# extension, at jaxemu's import) is used.

def with_exact(scheme, exact, platform: str, backend: str):
    """The scheme to run for operands flagged ``exact``: a float scheme's
    one-slice variant (FloatSplit.with_exact) where the backend that runs
    the full scheme runs it too (same result; else the full scheme)."""
    variant = exact_variant(scheme, exact)
    if variant is scheme or backend == "xla":
        return variant
    return variant if backends.backend_for(variant, platform) == backends.backend_for(scheme, platform) else scheme


def _ahead(split):
    """(the split triple or None, auto's column statistics or None) of the
    arrays made ahead (``presplit`` in the module docstring)."""
    split = tuple(split)
    has_split = len(split) in (SPLIT_ARRAYS, SPLIT_ARRAYS + STATS_ARRAYS)
    has_stats = len(split) in (STATS_ARRAYS, SPLIT_ARRAYS + STATS_ARRAYS)
    return (split[:SPLIT_ARRAYS] if has_split else None), (split[-STATS_ARRAYS:] if has_stats else None)


def impl(lhs, rhs, *split, dimension_numbers, scheme, out_dtype, backend, out_sharding=None, exact=(False, False),
         presplit="", platform="generic"):
    """The primitive in plain JAX: canonicalize, run the scheme's product
    (auto: its choice among concrete products), reshape. The fp32 scheme is
    dot_general itself at precision HIGHEST, on the operands as they are
    (jaxemu.dot(..., scheme="fp32"); emulate leaves a dot decided as fp32
    as the caller's dot_general instead: emulate._fp32_dot).
    ``split``: the work on the ``presplit`` operand made ahead (``_ahead``),
    passed to the product and to auto's test."""
    if isinstance(scheme, NativeFP32):
        return lax.dot_general(lhs, rhs, dimension_numbers, precision=lax.Precision.HIGHEST,
                               preferred_element_type=jnp.float32).astype(out_dtype)
    ds = dot_shape(lhs.shape, rhs.shape, dimension_numbers)
    a, b = canonicalize(lhs, rhs, ds)
    product = backends.product_for(platform, backend)
    triple, b_stats = _ahead(split)
    pre = {"": (None, None), "lhs": (triple, None), "rhs": (None, triple)}[presplit]
    with backends.b_rows_free(rhs_k_minor(ds)):
        if scheme.parts != (scheme,):  # composite: auto, above the backends
            runs_on = "xla" if backend == "xla" else backends.backend_for(scheme, platform)
            c = auto.auto_dot(a, b, scheme, platform, product, runs_on,
                              split=backends.split_product_for(scheme, platform, backend), exact=exact,
                              presplit=pre, b_stats=b_stats)
        elif triple is not None:
            c = product(a, b, with_exact(scheme, exact, platform, backend), presplit=pre)
        else:
            c = product(a, b, with_exact(scheme, exact, platform, backend))
    return c.reshape(ds.out_shape).astype(out_dtype)


def lower_impl(impl):
    """A lowering rule running ``impl`` (plain JAX) on the operands.

    The implementation reshapes and splits its operands freely, which JAX's
    explicit-sharding type rules would reject for sharded axes. It is traced
    on unsharded avals instead; the emitted HLO carries no sharding of its
    own, so XLA's partitioner propagates the operands' shardings through it
    like through any other ops (no gathers it would not do for dot_general).
    """
    rule = mlir.lower_fun(impl, multiple_results=False)
    sharded_rule = mlir.lower_fun(functools.partial(_sharded_impl, impl), multiple_results=False)

    def lowering(ctx, *args, **params):
        if _sharding.plan(ctx.avals_in[:2], ctx.avals_out, params["dimension_numbers"]) is not None:
            return sharded_rule(ctx, *args, **params)
        ctx = ctx.replace(avals_in=[_compat.unsharded(a) for a in ctx.avals_in],
                          avals_out=[_compat.unsharded(a) for a in ctx.avals_out])
        return rule(ctx, *args, **params)
    return lowering


def _sharded_impl(impl, lhs, rhs, *split, **params):
    """Operands with explicit shardings: the product per shard (shard_map),
    summed over the mesh axes that shard contracting dims (psum, FP32); a
    split made ahead, of the whole operand, is not a shard's: left."""
    p = _sharding.plan([_compat.typeof(lhs), _compat.typeof(rhs)], None, params["dimension_numbers"])
    local = functools.partial(impl, **dict(params, out_sharding=None, presplit=""))

    def per_shard(l, r):
        out = local(l, r)
        return jax.lax.psum(out, p.reduce_axes) if p.reduce_axes else out

    return jax.shard_map(per_shard, mesh=p.mesh, in_specs=(p.lhs_spec, p.rhs_spec), out_specs=p.out_spec,
                         check_vma=False)(lhs, rhs)


def _check_cuda_request(platform: str, scheme) -> None:
    """backend="cuda" fails rather than fall back to the xla backend."""
    if platform != "cuda":
        raise ValueError(f"backend='cuda' cannot run on platform {platform!r}: use a CUDA GPU or backend='xla'")
    reg = backends.registered(platform)
    if reg is None or reg.name != "cuda":
        raise ValueError("backend='cuda' requested, but the jaxemu CUDA extension is not built or "
                         "registered (see jaxemu.info())")
    if not backends.handles(scheme, platform):
        raise ValueError(f"backend='cuda' cannot run scheme {scheme.name!r} on this build "
                         "(see jaxemu.info())")


def _lowering(platform: str):
    rule = lower_impl(functools.partial(impl, platform=platform))

    def lowering(ctx, *args, **params):
        if params["backend"] == "cuda":
            _check_cuda_request(platform, params["scheme"])
        return rule(ctx, *args, **params)
    return lowering


# ----------------------------------------------------------------------------
# Registrations.

jaxemu_dot_p.def_impl(functools.partial(_compat.apply_primitive, jaxemu_dot_p))
jaxemu_dot_p.def_abstract_eval(_abstract_eval)
batching.primitive_batchers[jaxemu_dot_p] = _batch_rule
ad.defbilinear(jaxemu_dot_p, _transpose_lhs, _transpose_rhs)
# Its transposes see the two operands (a split made ahead is no operand of
# the linear map: it gets no cotangent).
_compat.transposes_on_first_two(jaxemu_dot_p, lambda params: dict(params, presplit=""))
# The JVP, as defbilinear's, with each tangent product's exact flags: the
# tangent is never exact (an exact operand's own tangent is zero: it comes
# from integers), the primal it meets keeps its flag. The tangent products
# split for themselves (one rule per operand: a split's tangent is zero).
def _jvp(primals, tangents, *, exact, presplit, **params):
    x, y, *split = primals
    tx, ty = tangents[:2]
    out = bind(x, y, *split, exact=exact, presplit=presplit, **params)
    terms = ([bind(tx, y, exact=(False, exact[1]), **params)] if type(tx) is not ad.Zero else []) + \
        ([bind(x, ty, exact=(exact[0], False), **params)] if type(ty) is not ad.Zero else [])
    if not terms:
        return out, _compat.zero_tangent(out)
    return out, terms[0] if len(terms) == 1 else terms[0] + terms[1]


ad.primitive_jvps[jaxemu_dot_p] = _jvp
mlir.register_lowering(jaxemu_dot_p, _lowering("generic"))
for _platform in ("cpu", "cuda"):
    mlir.register_lowering(jaxemu_dot_p, _lowering(_platform), platform=_platform)


# ----------------------------------------------------------------------------
# ``jaxemu_split``: one operand's split, made ahead of its product (for
# ``presplit`` above): x (the operand as the dot_general sees it) -> (slices,
# row exponents, max |x|), in the cuda backend's slice layout
# (cuda_fused.presplit_operand). On the cuda platform, where the kernels run
# the scheme, the split kernel makes it; elsewhere XLA's split makes the same
# values, which no product there reads (XLA deletes them as dead code).
# Params: side ("lhs" / "rhs"), shapes (the dot's (lhs, rhs) shapes),
# dimension_numbers, scheme (a concrete FloatSplit, or None: no split),
# stats (an auto scheme, or None; side "rhs" only): auto's column statistics
# of B (auto.column_stats: by the statistics kernels where they run auto's
# test, else XLA's, which no test there reads), after the split's arrays.

jaxemu_split_p = _compat.Primitive("jaxemu_split")
jaxemu_split_p.multiple_results = True


def _split_shapes(side, shapes, dimension_numbers, scheme, stats=None):
    ds = dot_shape(*shapes, dimension_numbers)
    if stats is not None and side != "rhs":
        raise ValueError("jaxemu_split: auto's statistics are taken ahead for B only")
    outs = () if scheme is None else cuda_fused.presplit_shapes(scheme, ds.b, ds.m if side == "lhs" else ds.n, ds.k)
    if stats is not None:
        outs += (jax.ShapeDtypeStruct((ds.b, ds.n), jnp.float32),) * 4
    return ds, tuple(outs)


def _split_abstract_eval(x, *, side, shapes, dimension_numbers, scheme, stats=None):
    # (x's other properties kept: the mesh axes it varies over, in shard_map)
    _, outs = _split_shapes(side, shapes, dimension_numbers, scheme, stats)
    return [x.update(shape=o.shape, dtype=o.dtype, weak_type=False) for o in outs]


def _split_impl(x, *, side, shapes, dimension_numbers, scheme, stats=None, platform="generic"):
    ds, _ = _split_shapes(side, shapes, dimension_numbers, scheme, stats)
    c = canonical_side(x, ds, side)
    out = []
    with backends.b_rows_free(rhs_k_minor(ds)):  # B's layout as the product will see it
        if scheme is not None:
            kernels = platform == "cuda" and backends.handles(scheme, platform)
            out += cuda_fused.presplit_operand(c, scheme, side, kernels)
        if stats is not None:  # as auto_dot takes them (its ``kernels``)
            on = backends.backend_for(stats, platform)
            out += auto.column_stats(c, None if on == "xla" else backends.stats_for(stats, platform))
    return list(out)


def _split_batch_rule(args, dims, **params):
    """A mapped operand: the products that read this split drop it
    (``_batch_rule``) and split for themselves, so its value is not needed:
    zeros of the unmapped shapes, which XLA deletes as dead code."""
    _, outs = _split_shapes(**params)
    return [jnp.zeros(o.shape, o.dtype) for o in outs], [None] * len(outs)  # (not mapped)


def _split_jvp(primals, tangents, **params):
    """A split is piecewise constant; its products take their tangents from
    the operands (the dot's JVP above), so the split's own are zero."""
    out = jaxemu_split_p.bind(*primals, **params)
    return out, [_compat.zero_tangent(o) for o in out]


def _split_transpose(cts, x, **params):
    """Where x is a linear input (jax.linear_transpose; custom_linear_solve
    transposes its matvec, as bicgstab and gmres do), the split is no part
    of the linear map: its products take their cotangents from x itself
    (the dot's transposes give the split none), so it passes none back."""
    return [None]


jaxemu_split_p.def_impl(functools.partial(_compat.apply_primitive, jaxemu_split_p))
jaxemu_split_p.def_abstract_eval(_split_abstract_eval)
batching.primitive_batchers[jaxemu_split_p] = _split_batch_rule
ad.primitive_jvps[jaxemu_split_p] = _split_jvp
ad.primitive_transposes[jaxemu_split_p] = _split_transpose
for _platform in ("generic", "cpu", "cuda"):
    mlir.register_lowering(
        jaxemu_split_p,
        mlir.lower_fun(functools.partial(_split_impl, platform=_platform), multiple_results=True),
        **({} if _platform == "generic" else {"platform": _platform}))
