"""The cuda backend: CUDA kernels registered through the XLA FFI.

The compiled extension ``jaxemu._jaxemu_cuda`` (built by pip when a CUDA
toolkit is found, see BUILD.md) exports ``registrations()``: FFI handler
capsules by target name. They are registered for the CUDA platform at
import, together with the backend's concrete product (jaxemu.backends) for
the schemes the kernels implement; everything else runs on the xla backend.
``register()`` runs once when jaxemu is imported.
"""
from __future__ import annotations

from typing import Optional

import importlib
import importlib.util

# The extension is optional: without it, everything runs on the xla backend.
_ext = None
IMPORT_ERROR: Optional[str] = None
if importlib.util.find_spec("jaxemu._jaxemu_cuda") is None:
    IMPORT_ERROR = "jaxemu._jaxemu_cuda is not installed: no CUDA toolkit at build time (see BUILD.md)"
else:  # pragma: no cover - depends on the build
    try:
        _ext = importlib.import_module("jaxemu._jaxemu_cuda")
    except ImportError as e:
        IMPORT_ERROR = f"jaxemu._jaxemu_cuda failed to import: {e}"


def built() -> bool:
    """True when the CUDA extension was compiled and imports."""
    return _ext is not None


def supports(scheme) -> bool:
    """True when the CUDA kernels implement ``scheme`` (every concrete part of
    it, for auto) on the visible GPUs."""
    if not (built() and _registered and "fused" in _ext.supported_families()):
        return False
    from . import handles
    return handles(scheme, "cuda")


_registered = False


def register() -> None:
    """Register the FFI targets and the cuda lowering (once; jaxemu's import calls it)."""
    global _registered
    if _ext is None or _registered:
        return
    from . import cuda_lowering
    cuda_lowering.register(_ext)
    _registered = True
