"""Backends: *how* a concrete scheme runs.

  xla  -- every scheme in plain JAX (any platform; the reference semantics).
  cuda -- CUDA kernels registered through the XLA FFI (NVIDIA GPUs), used for
          the schemes it implements when the extension is built.

The hook between the ``jaxemu_dot`` primitive (and ``auto``, which sits above
the backends) and a backend is a *concrete product*::

    product(a, b, scheme) -> c

a: float32 (B, M, K), b: float32 (B, K, N), both canonical (see jaxemu.dims),
possibly holding NaN/Inf; scheme: a concrete Scheme (never auto); c: float32
(B, M, N) with the scheme's numerics and FP32's NaN/Inf pattern. The xla
backend's ``canonical_dot`` is the reference product for every concrete
scheme. A backend registers its product for a platform together with the
schemes it handles (``register_product``); ``product_for`` returns a product
that runs each scheme on the registered backend where it handles it and on
the xla backend otherwise. Backends know only concrete schemes: ``auto``
composes their products (jaxemu/auto.py).
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
from typing import Callable, Dict, Optional

import jax.numpy as jnp

from ..schemes import Scheme, get_scheme
from . import xla

# (a: f32[B, M, K], b: f32[B, K, N], scheme: Scheme, scales=None, fits=False) -> f32[B, M, N];
# scales: the operands' row-scaling exponents if the caller has them (``row_scales``), or None;
# fits: True where the caller has established that a and b are finite and xla.product_fits
# holds (auto's data test has the statistics): the product then skips FP32's special-value
# conditional (xla.fp32_special_values), whose predicate costs a device-to-host copy on GPUs.
# A registered backend's product also takes presplit=(A's, B's) (default (None, None)): an
# operand's split made ahead of the product, outside a loop (jaxemu/hoist.py;
# cuda_fused.presplit_operand), or None; the xla reference has no slice layout to read.
Product = Callable

# Whether the canonical b (B, K, N) being traced is a transpose of an array
# laid out (B, N, K), K contiguous (x @ y.T: kNN's and k-means' distances), so
# that b's columns are rows in memory: a backend that splits B as the rows
# of B^T then reads the array itself, where taking b as it stands would have
# XLA write the transpose first (kNN: 0.29 ms per 512 MiB database, then a
# transposing split kernel at a third of memory speed; docs/performance.md,
# stop 37). Set by the primitive around its products (``b_rows_free``), read
# by the backends while they trace; a hint about layout, never about values.
_B_ROWS_FREE = contextvars.ContextVar("jaxemu_b_rows_free", default=False)


@contextlib.contextmanager
def b_rows_free(free: bool):
    token = _B_ROWS_FREE.set(bool(free))
    try:
        yield
    finally:
        _B_ROWS_FREE.reset(token)


def b_rows_are_free() -> bool:
    """Within ``b_rows_free(True)``: B^T's rows cost no transpose."""
    return _B_ROWS_FREE.get()


@dataclasses.dataclass(frozen=True)
class SplitProduct:
    """A backend's emulated product in two steps, for products that share
    their operands (auto's hybrids, jaxemu/auto.py). On finite canonical
    operands a0 (B, M, K), b0 (B, K, N) and a concrete float scheme:

      split(a0, b0, scheme) -> (sa, sb): the operands' slices and scaling
          exponents, in the backend's layout;
      rows(sa, idx), cols(sb, idx): the split of A's rows ``idx`` (B, r)
          (of B's columns), in that order: every row of A (column of B) is
          split on its own, so this is the split of the gathered rows, bit
          for bit;
      product(sa, sb, scheme) -> c (B, r, q): the emulated product, without
          FP32's special-value rules (the caller applies them once,
          xla.fp32_special_values).

    So ``product(rows(sa, i), cols(sb, j), s)``, with those rules applied,
    is the backend's concrete product of a0[:, i] and b0[:, :, j]."""

    split: Callable
    rows: Callable
    cols: Callable
    product: Callable


@dataclasses.dataclass(frozen=True)
class StatsKernels:
    """A backend's one-pass statistics for auto's data test (jaxemu/auto.py:
    operand_stats): ``rows(a, v=None)``: per row of a (B, R, K), max, min
    nonzero and sum of |a| over its finite values, and with the probe v (B,
    K) sum t, sum |t|, max |t|, sum |t|^(1/8) of t = a v; ``columns(b)``:
    the first three per column of b (B, K, N); ``probe_roundings(k)``: the
    error bound of rows' probe sums in units of float32's unit roundoff
    (XLA's float32 sums: k); ``split_rows(a, v, n)``: or None, fp16x3's
    split of a (B, M, K) made with rows(a, v)'s statistics in the same read,
    for a product with N = n: (the split as the product's ``presplit``
    takes it, the eight statistics), or None where that split cannot run
    for this product (then rows(a, v) and the product's own split do)."""

    rows: Callable
    columns: Callable
    probe_roundings: Callable[[int], int]
    split_rows: Optional[Callable] = None


@dataclasses.dataclass(frozen=True)
class Registered:
    """A backend's product for one platform, the concrete schemes it runs, and
    (optionally) the same product in two steps (SplitProduct) and auto's
    operand statistics in one pass each (``StatsKernels``)."""

    name: str
    product: Product
    handles: Callable[[Scheme], bool]
    split_product: Optional[SplitProduct] = None
    stats: Optional[StatsKernels] = None


_REGISTRY: Dict[str, Registered] = {}


@dataclasses.dataclass(frozen=True)
class GatedProduct:
    """A backend's concrete products behind a gate, for auto's choice on the
    device (docs/auto.md, "The choice on the device"): no conditional, every
    candidate's kernels launched, each doing its work only where an int32
    on the device names it.

      runs(scheme, shape) -> bool: whether the backend can run concrete
          ``scheme`` ("fp32" included) so at shape (B, M, N, K);
      product(a, b, scheme, choice, index, c_in, scales) -> C (B, M, N):
          the scheme's product of canonical float32 operands, FP32's special
          values included, where ``choice`` equals ``index``; elsewhere C is
          ``c_in`` (the earlier candidates' C, passed through without a copy)
          or, where c_in is None (the first candidate), values that a later
          candidate overwrites. ``scales``: fp16's row exponents
          (``row_scales``) or None."""

    runs: Callable
    product: Callable


_GATED: Dict[str, GatedProduct] = {}


def register_gated(platform: str, gated: GatedProduct) -> None:
    """Install a backend's ``GatedProduct`` on ``platform``."""
    _GATED[platform] = gated


def gated_for(platform: Optional[str] = None, backend: str = "default") -> Optional[GatedProduct]:
    """The gated products auto may choose among on the device, where the
    registered backend runs the emulated schemes and the switch
    JAXEMU_CUDA_DEVICE_CHOICE allows it (opt-in until a GPU run verifies
    it: switches.py); else None (auto's conditional)."""
    from .switches import enabled
    if backend == "xla" or not enabled("device_choice"):
        return None
    return _GATED.get(_platform(platform))


def _platform(platform: Optional[str]) -> str:
    if platform is None:
        import jax
        platform = jax.default_backend()
    return "cuda" if platform == "gpu" else platform


def register_product(platform: str, name: str, product: Product, handles: Callable[[Scheme], bool],
                     split_product: Optional[SplitProduct] = None, stats: Optional[StatsKernels] = None) -> None:
    """Install backend ``name``'s concrete product on ``platform`` ("cuda") for
    the schemes for which ``handles(scheme)`` is true (checked at trace time),
    and optionally the same product in two steps (``SplitProduct``) and auto's
    operand statistics (``StatsKernels``)."""
    _REGISTRY[platform] = Registered(name, product, handles, split_product, stats)


def registered(platform: Optional[str] = None) -> Optional[Registered]:
    """The backend registered on ``platform``, or None (then the xla backend runs everything)."""
    return _REGISTRY.get(_platform(platform))


def xla_product(platform: str) -> Product:
    """The xla backend's product (the reference semantics) on ``platform``."""
    return functools.partial(_xla_canonical_dot, platform=platform)


def _xla_canonical_dot(a, b, scheme, scales=None, fits=False, presplit=None, *, platform):
    # (its split computes its own row scaling; a split made ahead is the
    # cuda layout's, unused here: XLA deletes it as dead code)
    return xla.canonical_dot(a, b, scheme, platform, fits=fits)


def row_scales(a_max, b_max):
    """The row-scaling exponents of A (B, M) and B (B, N) from their largest
    finite |value| per row of A and column of B, as a split computes them
    (xla.row_scale_exponents); passed to a product (``Product``'s scales),
    they spare it a pass over each operand (auto's data test has these
    maxima)."""
    return tuple(xla.scale_exponents(x).astype(jnp.int32) for x in (a_max, b_max))


def handles(scheme, platform: Optional[str] = None) -> bool:
    """True when the backend registered on ``platform`` runs every concrete
    part of ``scheme`` (``Scheme.parts``)."""
    reg = registered(platform)
    return reg is not None and all(reg.handles(p) for p in get_scheme(scheme).parts)


def backend_for(scheme, platform: Optional[str] = None) -> str:
    """The backend that runs ``scheme`` on ``platform`` (default: JAX's default
    backend) when the caller leaves backend="default": for a composite scheme
    (auto), the one that runs its emulated parts."""
    platform = _platform(platform)
    return registered(platform).name if handles(scheme, platform) else "xla"


def split_product_for(scheme, platform: Optional[str] = None, backend: str = "default") -> Optional[SplitProduct]:
    """The SplitProduct of the backend on which ``product_for(platform,
    backend)`` runs every concrete part of ``scheme`` (auto then splits its
    operands once for all its hybrids' products, jaxemu/auto.py), or None
    (the parts run on different backends, or the backend has none)."""
    platform = _platform(platform)
    reg = registered(platform)
    parts = get_scheme(scheme).parts
    if backend == "xla" or reg is None or not any(reg.handles(p) for p in parts):
        return SplitProduct(xla.split_stacked, xla.stacked_rows, xla.stacked_cols,
                            functools.partial(xla.stacked_product, platform=platform))
    return reg.split_product if all(reg.handles(p) for p in parts) else None


def stats_for(scheme, platform: Optional[str] = None, backend: str = "default") -> Optional[StatsKernels]:
    """The registered backend's kernels for auto's operand statistics
    (``StatsKernels``), where that backend runs every concrete part of
    ``scheme`` and its switch is on; else None (XLA's reductions)."""
    platform = _platform(platform)
    reg = registered(platform)
    from .switches import enabled
    if backend == "xla" or reg is None or reg.stats is None or not enabled("stats"):
        return None
    return reg.stats if all(reg.handles(p) for p in get_scheme(scheme).parts) else None


def product_for(platform: str, backend: str = "default") -> Product:
    """The concrete product that ``backend`` ("default", "xla" or a registered
    backend's name) runs on ``platform``: each scheme on the registered
    backend where it handles it (not for backend="xla"), else on the xla backend."""
    platform = _platform(platform)
    reference = xla_product(platform)
    reg = registered(platform)
    if backend == "xla" or reg is None:
        return reference

    def product(a, b, scheme, scales=None, fits=False, presplit=(None, None)):
        s = get_scheme(scheme)
        if not reg.handles(s):
            return reference(a, b, s, fits=fits)
        return reg.product(a, b, s, scales, fits, presplit)
    return product
