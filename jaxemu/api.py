"""Public entry points: dot, matmul, dot_general, and the default-scheme context.

They check their arguments (clear errors naming the argument), promote
bfloat16/float16 operands to float32 exactly, and bind the ``jaxemu_dot``
primitive.
"""
from __future__ import annotations

import contextlib
from typing import Optional

import jax.numpy as jnp
import numpy as np

from . import _compat, primitive
from .dims import matmul_dimension_numbers, normalize_dimension_numbers, dot_shape
from .schemes import Scheme, SchemeLike, get_scheme

DEFAULT_SCHEME = "bf16x6"

# JAX config states, so that they are part of jit's cache key (a function
# jitted under one default is retraced under another).
_default_scheme = _compat.context_state("jaxemu_default_scheme", DEFAULT_SCHEME,
                                        "Scheme used by jaxemu where none is given.")
_default_backend = _compat.context_state("jaxemu_default_backend", "default",
                                         "Backend used by jaxemu where none is given.")

_OK_IN = (np.dtype(np.float32), np.dtype(jnp.bfloat16), np.dtype(np.float16))
_OK_OUT = _OK_IN


@contextlib.contextmanager
def default_scheme(scheme: SchemeLike):
    """Context manager setting the scheme used where none is given, like
    ``jax.default_matmul_precision``. Read when a function is traced.

    Example:
      >>> with jaxemu.default_scheme("fp16x3"):
      ...     c = jaxemu.dot(a, b)
    """
    with _default_scheme(get_scheme(scheme)):
        yield


@contextlib.contextmanager
def default_backend(backend: str):
    """Context manager choosing the backend where none is given: "default"
    (CUDA kernels where built, else plain JAX), "xla" (force plain JAX, e.g.
    for comparison) or "cuda" (fail rather than fall back)."""
    with _default_backend(check_backend(backend)):
        yield


def current_scheme() -> Scheme:
    return get_scheme(_default_scheme.value)


def current_backend() -> str:
    return _default_backend.value


def check_backend(backend: Optional[str]) -> str:
    if backend is None:
        return current_backend()
    if backend not in primitive.BACKENDS:
        raise ValueError(f"backend must be one of {primitive.BACKENDS}, got {backend!r}")
    return backend


def resolve_scheme(scheme: Optional[SchemeLike]) -> Scheme:
    return current_scheme() if scheme is None else get_scheme(scheme)


def _check_x64(s: Scheme) -> None:
    if s.operand_dtype == "float64":
        import jax
        if not jax.config.jax_enable_x64:
            raise TypeError(f"scheme {s.name!r} emulates float64 products and needs float64 arrays: "
                            "enable them with jax.config.update('jax_enable_x64', True)")


def _operand(x, name: str, s: Optional[Scheme] = None):
    """Check one operand against the scheme's operand dtype (float32 unless
    the scheme is an FP64 emulation) and promote bf16/f16 to float32."""
    want64 = s is not None and s.operand_dtype == "float64"
    if want64:
        _check_x64(s)
    if not hasattr(x, "dtype") or not hasattr(x, "shape"):
        try:
            x = jnp.asarray(x)
        except (TypeError, ValueError):  # jnp.asarray(None) raises ValueError
            raise TypeError(f"{name} must be an array, got {type(x).__name__}") from None
    dt = np.dtype(x.dtype)
    if want64:
        if dt != np.float64:
            raise TypeError(f"{name} has dtype {dt}, but scheme {s.name!r} emulates float64 products: "
                            f"cast {name} to float64, or use a float32 scheme such as 'ozaki2_f32'")
        return x
    if dt == np.float64:
        raise TypeError(f"{name} has dtype float64, but "
                        f"{'scheme ' + repr(s.name) if s is not None else 'jaxemu'} emulates float32 products: cast {name} "
                        "to float32, use scheme='ozaki2_f64' (FP64 emulation), or jax.lax.dot_general")
    if dt not in _OK_IN:
        raise TypeError(f"{name} has dtype {dt}; jaxemu needs floating-point operands "
                        "(float32, or bfloat16/float16, which are promoted exactly)")
    return x if dt == np.float32 else x.astype(jnp.float32)


def _out_dtype(preferred_element_type, s: Optional[Scheme] = None):
    if s is not None and s.operand_dtype == "float64":
        if preferred_element_type is not None and np.dtype(preferred_element_type) != np.float64:
            raise TypeError(f"preferred_element_type must be float64 (or None) for scheme {s.name!r}, "
                            f"got {np.dtype(preferred_element_type)}")
        return np.dtype(np.float64)
    if preferred_element_type is None:
        return np.dtype(np.float32)
    dt = np.dtype(preferred_element_type)
    if dt not in _OK_OUT:
        raise TypeError(f"preferred_element_type must be float32, bfloat16 or float16 (the product is "
                        f"computed in float32), got {dt}")
    return dt


def _out_sharding(s):
    """As lax.dot_general: a NamedSharding or PartitionSpec (resolved against
    the current mesh by JAX), or None."""
    if s is None:
        return None
    from jax.sharding import NamedSharding, PartitionSpec
    if isinstance(s, PartitionSpec):
        import jax
        return NamedSharding(jax.sharding.get_abstract_mesh(), s)
    if not isinstance(s, NamedSharding):
        raise TypeError(f"out_sharding must be a NamedSharding or PartitionSpec, got {type(s).__name__}")
    mesh = getattr(s.mesh, "abstract_mesh", s.mesh)  # avals carry abstract meshes
    return NamedSharding(mesh, s.spec)


def dot_general(lhs, rhs, dimension_numbers, scheme: Optional[SchemeLike] = None, *,
                preferred_element_type=None, backend: Optional[str] = None, out_sharding=None):
    """Emulated ``lax.dot_general``: FP32 products on low-precision tensor cores.

    Arguments:
      lhs, rhs: float32 arrays (bfloat16/float16 are promoted exactly); float64
        arrays for the FP64 scheme "ozaki2_f64" (needs jax_enable_x64).
      dimension_numbers: ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``,
        as in ``jax.lax.dot_general``; any ranks, several contracting dims.
      scheme: a scheme name ("bf16x6", "fp16x3", "int8_l4", ... see
        ``jaxemu.schemes()``) or Scheme object; default: ``jaxemu.default_scheme``.
      preferred_element_type: result dtype; float32 (default), bfloat16 or float16.
      backend: "default", "xla" or "cuda" (see ``jaxemu.default_backend``).
      out_sharding: the result's sharding on explicit-sharding meshes, as for
        ``lax.dot_general`` (needed there when contracting dims are sharded).

    Returns:
      An array of shape (batch..., lhs free..., rhs free...), like lax.dot_general.

    Example:
      >>> jaxemu.dot_general(x, w, (((1,), (0,)), ((), ())), scheme="bf16x6")
    """
    s = resolve_scheme(scheme)
    be = check_backend(backend)
    lhs = _operand(lhs, "lhs", s)
    rhs = _operand(rhs, "rhs", s)
    dn = normalize_dimension_numbers(dimension_numbers, lhs.ndim, rhs.ndim)
    dot_shape(lhs.shape, rhs.shape, dn)  # size checks with clear messages
    return primitive.bind(lhs, rhs, dimension_numbers=dn, scheme=s,
                          out_dtype=_out_dtype(preferred_element_type, s), backend=be,
                          out_sharding=_out_sharding(out_sharding))


def dot(a, b, scheme: Optional[SchemeLike] = None, *, preferred_element_type=None,
        backend: Optional[str] = None, out_sharding=None):
    """Emulated ``jnp.dot`` for operands of rank 1 or 2 (and ``jnp.dot``'s
    rule for higher ranks: contract a's last axis with b's second-to-last).

    Example:
      >>> c = jaxemu.dot(a, b, scheme="bf16x6")   # FP32 accuracy on BF16 tensor cores
    """
    # Checked here, under dot's own argument names (a, b), before np.ndim
    # (which calls None, strings and dicts rank 0).
    s = resolve_scheme(scheme)  # its operand dtype: float32, or float64 for ozaki2_f64
    a = _operand(a, "a", s)
    b = _operand(b, "b", s)
    a_nd, b_nd = a.ndim, b.ndim
    if a_nd == 0 or b_nd == 0:
        raise ValueError(f"jaxemu.dot needs operands of rank >= 1, but {'a' if a_nd == 0 else 'b'} is a scalar; "
                         "use multiplication for scalars")
    dn = (((a_nd - 1,), (max(b_nd - 2, 0),)), ((), ()))
    return dot_general(a, b, dn, scheme, preferred_element_type=preferred_element_type, backend=backend,
                       out_sharding=out_sharding)


def matmul(a, b, scheme: Optional[SchemeLike] = None, *, preferred_element_type=None,
           backend: Optional[str] = None):
    """Emulated ``jnp.matmul`` (``a @ b``) with numpy's broadcasting of batch dims.

    Example:
      >>> c = jaxemu.matmul(x, w, scheme="fp16x3")   # x: (batch, m, k), w: (k, n)
    """
    s = resolve_scheme(scheme)
    a = _operand(a, "a", s)
    b = _operand(b, "b", s)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"jaxemu.matmul needs operands of rank >= 1, but {'a' if a.ndim == 0 else 'b'} "
                         "is a scalar")
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    if a_vec:
        a = a[None, :]
    if b_vec:
        b = b[:, None]
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: contracting dimensions differ in size: a has {a.shape[-1]} "
                         f"(shape {a.shape}), b has {b.shape[-2]} (shape {b.shape})")
    kw = dict(preferred_element_type=preferred_element_type, backend=backend)
    if b.ndim == 2:  # (..., m, k) @ (k, n): a's batch dims are free dims, no broadcast
        out = dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())), scheme, **kw)
    elif a.ndim == 2:  # (m, k) @ (..., k, n): result (m, ..., n), then move m
        out = jnp.moveaxis(dot_general(a, b, (((1,), (b.ndim - 2,)), ((), ())), scheme, **kw), 0, -2)
    else:
        try:
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise ValueError(f"matmul: batch dimensions of a (shape {a.shape}) and b (shape {b.shape}) "
                             "do not broadcast") from None
        a = jnp.broadcast_to(a, batch + a.shape[-2:])
        b = jnp.broadcast_to(b, batch + b.shape[-2:])
        out = dot_general(a, b, matmul_dimension_numbers(a.ndim, b.ndim), scheme, **kw)
    if a_vec:
        out = out[..., 0, :]
    if b_vec:
        out = out[..., 0]
    return out


def int8_fallback_stats(a, b, scheme: SchemeLike = "int8_l4"):
    """How much of ``a @ b`` an int8 scheme computes through its float fallback.

    Returns a dict: a_tiles, a_fallback, b_tiles, b_fallback (tiles whose
    exponent spread exceeds the scheme's max_spread), and fallback_fraction,
    the share of (row, K-tile, column) products done by the fallback scheme.

    Example:
      >>> jaxemu.int8_fallback_stats(a, b, "int8_l4")["fallback_fraction"]
    """
    from .backends import xla
    from .schemes import Int8Split
    s = get_scheme(scheme)
    if not isinstance(s, Int8Split):
        raise ValueError(f"int8_fallback_stats needs an int8 scheme, got {s.name!r}")
    a, b = _operand(a, "a"), _operand(b, "b")
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"int8_fallback_stats needs a (m, k) and b (k, n), got {a.shape} and {b.shape}")
    return xla.int8_fallback_counts(a[None], b[None], s)
