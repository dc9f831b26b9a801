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

import dataclasses
import functools
from typing import Callable, Dict, Optional

from ..schemes import Scheme, get_scheme
from . import xla

Product = Callable  # (a: f32[B, M, K], b: f32[B, K, N], scheme: Scheme) -> f32[B, M, N]


@dataclasses.dataclass(frozen=True)
class Registered:
    """A backend's product for one platform, and the concrete schemes it runs."""

    name: str
    product: Product
    handles: Callable[[Scheme], bool]


_REGISTRY: Dict[str, Registered] = {}


def _platform(platform: Optional[str]) -> str:
    if platform is None:
        import jax
        platform = jax.default_backend()
    return "cuda" if platform == "gpu" else platform


def register_product(platform: str, name: str, product: Product, handles: Callable[[Scheme], bool]) -> None:
    """Install backend ``name``'s concrete product on ``platform`` ("cuda") for
    the schemes for which ``handles(scheme)`` is true (checked at trace time)."""
    _REGISTRY[platform] = Registered(name, product, handles)


def registered(platform: Optional[str] = None) -> Optional[Registered]:
    """The backend registered on ``platform``, or None (then the xla backend runs everything)."""
    return _REGISTRY.get(_platform(platform))


def xla_product(platform: str) -> Product:
    """The xla backend's product (the reference semantics) on ``platform``."""
    return functools.partial(_xla_canonical_dot, platform=platform)


def _xla_canonical_dot(a, b, scheme, platform):
    return xla.canonical_dot(a, b, scheme, platform)


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


def xla_runs_parts(scheme, platform: Optional[str] = None, backend: str = "default") -> bool:
    """True when ``product_for(platform, backend)`` runs every concrete part of
    ``scheme`` on the xla backend: auto can then split each operand once for
    all its hybrids' products (jaxemu/auto.py)."""
    reg = registered(platform)
    return backend == "xla" or reg is None or not any(reg.handles(p) for p in get_scheme(scheme).parts)


def product_for(platform: str, backend: str = "default") -> Product:
    """The concrete product that ``backend`` ("default", "xla" or a registered
    backend's name) runs on ``platform``: each scheme on the registered
    backend where it handles it (not for backend="xla"), else on the xla backend."""
    platform = _platform(platform)
    reference = xla_product(platform)
    reg = registered(platform)
    if backend == "xla" or reg is None:
        return reference

    def product(a, b, scheme):
        s = get_scheme(scheme)
        return (reg.product if reg.handles(s) else reference)(a, b, s)
    return product
