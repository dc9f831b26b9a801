"""Environment switches of the cuda backend's kernels, read at trace time.

Kernels run by default once a GPU run has passed their tests; a kernel
written since, verified on the CPU only (its per-thread code against exact
references), is opt-in until then: its switch must be "1". Every switch
names the path it replaces, which stays available for comparison.

| switch | kernel | default | verified on a GPU |
|---|---|---|---|
| JAXEMU_CUDA_INT8 | Ozaki II's int8 GEMM and float32 CRT (else: xla backend) | on ("0": off) | H100, 2026-11-25 |
| JAXEMU_CUDA_SPLIT | the fused path's operand split (else: XLA's split) | off ("1": on) | not yet |
| JAXEMU_CUDA_RESIDUES | Ozaki II's residues (else: XLA's residue fusions) | off ("1": on) | not yet |
| JAXEMU_CUDA_CRT64 | the CRT kernel's float64 output for ozaki2_f64 (else: XLA's exact limbs) | off ("1": on) | not yet |
"""
from __future__ import annotations

import os

INT8 = "JAXEMU_CUDA_INT8"
_OPT_IN = {"split": "JAXEMU_CUDA_SPLIT", "residues": "JAXEMU_CUDA_RESIDUES", "crt64": "JAXEMU_CUDA_CRT64"}


def int8_enabled() -> bool:
    """Ozaki II on the int8 kernels (default on)."""
    return os.environ.get(INT8, "1") != "0"


def opt_in(kernel: str) -> bool:
    """Whether an opt-in kernel ("split", "residues", "crt64") runs: its
    switch is "1"."""
    return os.environ.get(_OPT_IN[kernel], "0") == "1"


def opt_in_switches() -> dict:
    """kernel -> environment variable, for the opt-in kernels."""
    return dict(_OPT_IN)
