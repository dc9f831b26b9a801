"""jaxemu: FP32-accurate matrix products on low-precision tensor cores, from JAX.

    c = jaxemu.dot(a, b, scheme="bf16x6")          # explicit emulated product
    f_fast = jax.jit(jaxemu.emulate(f))            # rewrite every f32 dot in f

See README.md for the scheme catalogue and ``jaxemu.schemes()`` for names.
"""
from .schemes import Scheme, NativeFP32, FloatSplit, Int8Split, Auto, get_scheme, schemes
from .api import dot, dot_general, matmul, default_scheme, default_backend, current_scheme, int8_fallback_stats
from .primitive import jaxemu_dot_p
from .backends import cuda as _cuda
from .emulate import emulate, explain, DotInfo, DotDecision, NothingEmulatedWarning
from .info import info
from .auto import auto_report
from .costs import calibrate, CostModel
from .tune import Plan, tune, product_cost
from ._version import __version__

_cuda.register()  # the CUDA kernels' FFI targets and lowering, when the extension is built

__all__ = [
    "Scheme", "NativeFP32", "FloatSplit", "Int8Split", "Auto", "get_scheme", "schemes",
    "dot", "dot_general", "matmul", "default_scheme", "default_backend", "current_scheme", "int8_fallback_stats",
    "jaxemu_dot_p", "emulate", "explain", "DotInfo", "DotDecision", "NothingEmulatedWarning", "info", "auto_report", "calibrate", "CostModel", "Plan", "tune", "product_cost", "__version__",
]
