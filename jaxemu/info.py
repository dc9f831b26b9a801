"""``jaxemu.info()``: what is built, which devices JAX sees, which backend runs each scheme."""
from __future__ import annotations

import dataclasses
from typing import Dict, Tuple

import jax

from . import backends, costs
from .backends import cuda, switches
from .schemes import schemes


@dataclasses.dataclass(frozen=True)
class Info:
    version: str
    jax_version: str
    cuda_extension_built: bool
    cuda_extension_note: str
    devices: Tuple[str, ...]
    default_platform: str
    backend_per_scheme: Dict[str, str]
    auto_cost_model: str
    kernel_switches: Dict[str, str] = dataclasses.field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"jaxemu {self.version} on jax {self.jax_version}",
                 f"CUDA extension: {'built' if self.cuda_extension_built else 'not built'}"
                 + (f" ({self.cuda_extension_note})" if self.cuda_extension_note else ""),
                 f"devices: {', '.join(self.devices)} (default platform: {self.default_platform})",
                 "backend per scheme (backend='default'):"]
        lines += [f"  {k:15s} {v}" for k, v in self.backend_per_scheme.items()]
        lines.append(f"auto's cost model here: {self.auto_cost_model}")
        if self.kernel_switches:
            lines.append("cuda kernels (jaxemu/backends/switches.py): "
                         + ", ".join(f"{k} {v}" for k, v in self.kernel_switches.items()))
        return "\n".join(lines)


def info() -> Info:
    """A summary of the installation, printed by ``python -m jaxemu info``."""
    from ._version import __version__
    platform = jax.default_backend()
    devs = tuple(f"{d.device_kind} ({d.platform})" for d in jax.devices())
    note = "" if cuda.built() else (cuda.IMPORT_ERROR or "")
    model = costs.model_for(jax.devices()[0].device_kind, backends.backend_for("auto", platform))
    kernels = {k: f"on ({var}=0 turns it off)" if on else
               f"off ({var}=1 turns it on)" if k in switches.OPT_IN else f"off ({var}=0)"
               for k, (var, on) in switches.switches().items()} if cuda.built() else {}
    return Info(__version__, jax.__version__, cuda.built(), note, devs, platform,
                {s: backends.backend_for(s, platform) for s in schemes()},
                model.source if model else "none (thresholds and slice counts; `python -m jaxemu calibrate` measures one)",
                kernels)
