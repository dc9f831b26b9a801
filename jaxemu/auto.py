"""The "auto" scheme (APE's adapter): the fastest scheme the data allow.

1. By size (static): where emulation does not pay -- small products, or a
   dimension too thin to fill the tensor cores -- run native FP32.
2. By data (at run time): classify blocks of A (row-block x K-block) and of
   B (K-block x column-block):
     class 0 "fp16": finite, nonzero exponents within FP16_SPREAD binades and
       far from the f32 range ends: fp16x3 keeps all 22+ bits of every value
       after the per-row power-of-two scaling;
     class 1 "bf16": finite, away from the f32 range ends: bf16x6 is exact;
     class 2 "fp32": values within 2^24 of FLT_MAX or below 2^-100, where
       slices under- or overflow.
   An output block needs the highest class among its input blocks; the
   counts come from APE's mask product mask_C = mask_A x mask_B.
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
    if min(m, n, k) < s.block:
        return "fp32", f"min(M, N, K) = {min(m, n, k)} < {s.block}: too thin for emulation to pay"
    return "", ""


def _block_classes(x, block: int):
    """Class (0, 1, 2) per block of canonical x; blocks tile axes 1 and 2."""
    from .backends.xla import exponent
    bsz, r, c = x.shape
    pr, pc = (-r) % block, (-c) % block
    x = jnp.pad(x, ((0, 0), (0, pr), (0, pc)))
    xb = x.reshape(bsz, (r + pr) // block, block, (c + pc) // block, block)
    ax = jnp.abs(jnp.where(jnp.isfinite(xb), xb, 0.0))
    amax = jnp.max(ax, axis=(2, 4))
    amin = jnp.min(jnp.where(ax > 0, ax, jnp.inf), axis=(2, 4))
    emax = exponent(amax)
    emin = exponent(jnp.where(jnp.isinf(amin), amax, amin))
    nonzero = amax > 0
    in_window = ~nonzero | ((emax <= SAFE_MAX_EXP) & (emin >= SAFE_MIN_EXP))
    fp16_ok = in_window & (~nonzero | (emax - emin <= FP16_SPREAD))
    return jnp.where(fp16_ok, 0, jnp.where(in_window, 1, 2))


def block_counts(a, b, s: Auto):
    """Output-block counts per needed class, via mask products. Returns
    (n_fp16, n_bf16, n_fp32) as int32 scalars for canonical a, b."""
    ca = _block_classes(a, s.block)                              # (B, Mb, Kb)
    cb = jnp.swapaxes(_block_classes(jnp.swapaxes(b, 1, 2), s.block), 1, 2)  # (B, Kb, Nb)
    f = jnp.float32
    mm = lambda x, y: lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,))), precision=lax.Precision.HIGHEST)
    kb = ca.shape[2]
    # Output block needs >= class c if some K-block pair does: count pairs both below c.
    below1 = mm((ca < 1).astype(f), (cb < 1).astype(f))  # pairs fine for fp16
    below2 = mm((ca < 2).astype(f), (cb < 2).astype(f))  # pairs fine for bf16
    need16 = below1 == kb
    need6 = (below2 == kb) & ~need16
    need32 = below2 < kb
    return need16.sum().astype(jnp.int32), need6.sum().astype(jnp.int32), need32.sum().astype(jnp.int32)


def choice_index(a, b, s: Auto):
    n16, n6, n32 = block_counts(a, b, s)
    return jnp.where(n32 > 0, 2, jnp.where(n6 > 0, 1, 0))


def auto_dot(a, b, s: Auto, platform: str):
    """The auto scheme on canonical f32 operands (may contain NaN/Inf)."""
    from .backends import xla
    bsz, m, k = a.shape
    n = b.shape[2]
    static, _ = size_choice(bsz, m, n, k, s)
    if static:
        return xla.canonical_dot(a, b, get_scheme(static), platform)
    branches = [lambda a, b, c=c: xla.canonical_dot(a, b, get_scheme(c), platform) for c in CHOICES]
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
