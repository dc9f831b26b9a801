"""The "auto" scheme (APE's adapter): the fastest scheme the data allow.

1. By size (static): where emulation does not pay -- small products, or a
   dimension too thin to fill the tensor cores -- run native FP32.
2. By data (at run time): classify each row of A and column of B (the unit
   of fp16x3's power-of-two scaling), then panels of ``block`` rows/columns:
     class 0 "fp16": nonzero exponents within FP16_SPREAD binades and far from
       the f32 range ends: fp16x3 keeps 22+ bits of every value after scaling;
     class 1 "bf16": away from the f32 range ends: bf16x6 is exact;
     class 2 "fp32": values beyond 2^100 or below 2^-100, where slices or
       their residuals under- or overflow.
   An output block needs the higher class of its two panels; the counts come
   from APE's mask product mask_C = mask_A x mask_B.
   The fp16 test is strict on purpose: one value 2^-25 below its row's
   maximum would lose bits in fp16x3, and only its partner in B decides
   whether that matters, so auto assumes it does.
3. Choose and run (lax.switch, so only the chosen branch executes): fp16x3
   when every output block allows it, else bf16x6 when none needs FP32, else
   FP32. On the xla backend a block-wise hybrid would compute every
   participating scheme in full (XLA cannot skip blocks), so it never beats
   the pure choice; a fused CUDA kernel can, see backends/cuda.py.
NaN/Inf need no class of their own: every scheme reproduces FP32's NaN/Inf
pattern (backends/xla.py).
"""
from __future__ import annotations

from typing import Dict, Tuple

import jax.numpy as jnp
from jax import lax

from .schemes import Auto, get_scheme

# fp16x3 keeps full precision for values within ~26 binades below their row's
# maximum (hi and lo stay normal in fp16 after scaling the maximum to
# [2^13, 2^14)); 24 leaves a margin.
FP16_SPREAD = 24
# Exponent window in which bf16/fp16 slices and their residuals stay normal
# and partial sums cannot overflow.
SAFE_MIN_EXP = -100
SAFE_MAX_EXP = 100

CHOICES = ("fp16x3", "bf16x6", "fp32")


def size_choice(b: int, m: int, n: int, k: int, s: Auto) -> Tuple[str, str]:
    """Static dispatch by size: ('fp32', why) when emulation does not pay, else ('', '')."""
    flops = 2 * b * m * n * k
    if flops < s.min_flops:
        return "fp32", f"2MNK = {flops:.3g} < {s.min_flops:.3g}: too small for emulation to pay"
    if min(m, n, k) < s.min_dim:
        return "fp32", f"min(M, N, K) = {min(m, n, k)} < {s.min_dim}: too thin for emulation to pay"
    return "", ""


def _row_classes(x):
    """Class (0, 1, 2) of each row of canonical x (B, R, C), over its C values:
    the granularity of fp16x3's power-of-two scaling (a row of A, a column of B)."""
    from .backends.xla import exponent
    ax = jnp.abs(jnp.where(jnp.isfinite(x), x, 0.0))
    amax = jnp.max(ax, axis=2)
    amin = jnp.min(jnp.where(ax > 0, ax, jnp.inf), axis=2)
    emax = exponent(amax)
    emin = exponent(jnp.where(jnp.isinf(amin), amax, amin))
    nonzero = amax > 0
    in_window = ~nonzero | ((emax <= SAFE_MAX_EXP) & (emin >= SAFE_MIN_EXP))
    fp16_ok = in_window & (~nonzero | (emax - emin <= FP16_SPREAD))
    return jnp.where(fp16_ok, 0, jnp.where(in_window, 1, 2))  # (B, R)


def _panel_classes(row_cls, block: int):
    """Highest class per panel of ``block`` rows (B, R) -> (B, ceil(R / block))."""
    bsz, r = row_cls.shape
    pad = (-r) % block
    c = jnp.pad(row_cls, ((0, 0), (0, pad)))
    return c.reshape(bsz, (r + pad) // block, block).max(axis=2)


def block_counts(a, b, s: Auto):
    """Output-block counts (n_fp16, n_bf16, n_fp32) for canonical a, b.

    A row panel (``s.block`` rows of A) and a column panel of B are each
    classified; an output block needs the higher class of its two panels.
    APE counts blocks with the mask product mask_C = mask_A x mask_B; with
    whole rows as the scaling unit, K collapses and the product is an outer
    product of the panel masks.
    """
    ca = _panel_classes(_row_classes(a), s.block)                         # (B, Mb)
    cb = _panel_classes(_row_classes(jnp.swapaxes(b, 1, 2)), s.block)     # (B, Nb)
    need = jnp.maximum(ca[:, :, None], cb[:, None, :])                    # mask_A x mask_B
    return tuple((need == c).sum().astype(jnp.int32) for c in (0, 1, 2))


def choice_index(a, b, s: Auto):
    n16, n6, n32 = block_counts(a, b, s)
    return jnp.where(n32 > 0, 2, jnp.where(n6 > 0, 1, 0))


def auto_dot(a, b, s: Auto, platform: str, level_sum=None):
    """The auto scheme on canonical f32 operands (may contain NaN/Inf);
    ``level_sum`` is the backend's slice-product routine (see xla.canonical_dot)."""
    from .backends import xla
    level_sum = level_sum or xla.xla_level_sum
    bsz, m, k = a.shape
    n = b.shape[2]
    static, _ = size_choice(bsz, m, n, k, s)
    if static:
        return xla.canonical_dot(a, b, get_scheme(static), platform, level_sum)
    branches = [lambda a, b, c=c: xla.canonical_dot(a, b, get_scheme(c), platform, level_sum) for c in CHOICES]
    return lax.switch(choice_index(a, b, s), branches, a, b)


def auto_report(a, b, scheme="auto") -> Dict[str, object]:
    """What ``auto`` does for 2-D operands a (m, k) and b (k, n): the static
    decision, the output-block counts per class, and the scheme it runs."""
    s = get_scheme(scheme)
    if not isinstance(s, Auto):
        raise ValueError(f"auto_report needs an auto scheme, got {s.name!r}")
    a = jnp.asarray(a, jnp.float32)[None]
    b = jnp.asarray(b, jnp.float32)[None]
    static, why = size_choice(1, a.shape[1], b.shape[2], a.shape[2], s)
    if static:
        return dict(scheme=static, reason=why, blocks=None)
    n16, n6, n32 = (int(x) for x in block_counts(a, b, s))
    pick = CHOICES[2 if n32 else 1 if n6 else 0]
    return dict(scheme=pick, reason="the fastest scheme safe for every output block",
                blocks=dict(fp16x3=n16, bf16x6=n6, fp32=n32))
