"""Backends: *how* a scheme runs.

  xla  -- every scheme in plain JAX (any platform; the reference semantics).
  cuda -- CUDA kernels registered through the XLA FFI (NVIDIA GPUs), used for
          the schemes it implements when the extension is built.
"""
from __future__ import annotations


def backend_for(scheme, platform: str | None = None) -> str:
    """The backend that runs ``scheme`` on ``platform`` (default: JAX's default
    backend) when the caller leaves backend="default"."""
    import jax
    from ..schemes import get_scheme
    from . import cuda
    platform = platform or jax.default_backend()
    if platform in ("cuda", "gpu") and cuda.supports(get_scheme(scheme)):
        return "cuda"
    return "xla"
