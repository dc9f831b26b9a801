"""The cuda backend's int8 path: Ozaki scheme II (jaxemu/_ozaki2.py) on the
int8 tensor cores.

XLA finds each row's (A) and column's (B) scaling exponent (one reduction
per operand); the residue kernel (ffi/int8/residues.cuh) writes the int8
residues of the scaled integers for every modulus reading each operand once,
B's transposed (K contiguous: int8 wgmma reads only K-major operands), both
zero-padded to the GEMM's alignment (JAXEMU_CUDA_RESIDUES=0, switches.py:
XLA's fusions write the same bytes); one FFI call (ffi/int8/: CUTLASS sm90 warp-specialized int8
GEMM) computes the residue products of every modulus and batch entry, exact
in int32 and reduced modulo their modulus in its epilogue (one byte each);
one more FFI call (the CRT kernel) forms the mixed-radix digits from these
residues and writes C once, from the digits' double sum rounded
once for float32; for float64 (ozaki2_f64) from the exact integer in 192-bit
arithmetic, rounded once (JAXEMU_CUDA_CRT64=0, and beyond MAX_CRT_MODULI
moduli: the xla backend's exact limb arithmetic).

The special-value and overflow rules are the xla backend's canonical_dot,
with this module's product on the finite operands.
"""
from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import _ozaki2
from .._int8dot import pad_axis
from ..schemes import Ozaki2, get_scheme
from . import switches
from . import xla as xla_backend

# ffi/int8/params.h: exactness bound on K, TMA alignment of K (int8) and N
# (int32 rows; uint8 rows of residues), moduli the CRT kernel and the GEMM's
# residue epilogue hold.
MAX_EXACT_K = (1 << 17) - 1
ALIGN_K = 16
ALIGN_N = 4
ALIGN_N_RESIDUES = 16
MAX_CRT_MODULI = 20
# K is cut into pieces of at most this many (a multiple of ALIGN_K below MAX_EXACT_K).
K_PIECE = 1 << 16
# At most this many bytes of residue products at a time: a larger C is
# computed in column blocks (the kNN distances, 8192 x 262144 with 8 moduli,
# had asked for 72 GiB on an 80 GB H100).
MAX_PRODUCT_BYTES = 8 << 30


def int8_matmul(a, bt):
    """Exact int32 products of int8 a (L, M, K) and bt (L, N, K) (B transposed):
    (L, M, N), in one GEMM launch (K <= MAX_EXACT_K). K is zero-padded to a
    multiple of 16 (zeros add nothing); N must be a multiple of 4."""
    lb, m, k = a.shape
    n = bt.shape[1]
    if k > MAX_EXACT_K:
        raise ValueError(f"int8_matmul: K = {k} > {MAX_EXACT_K}: int32 sums could overflow (cut K first)")
    if n % ALIGN_N:
        raise ValueError(f"int8_matmul: N = {n} must be a multiple of {ALIGN_N}")
    a, bt = pad_axis(a, 2, ALIGN_K), pad_axis(bt, 2, ALIGN_K)
    ws = jax.ShapeDtypeStruct((workspace_bytes(lb, m, n, a.shape[2]),), jnp.uint8)
    c, _ = jax.ffi.ffi_call("jaxemu_int8_gemm", (jax.ShapeDtypeStruct((lb, m, n), jnp.int32), ws))(a, bt)
    return c


def int8_matmul_residues(a, bt, moduli):
    """The products of int8 a (L, M, K) and bt (L, N, K) (B transposed)
    reduced modulo m_l = moduli[l // (L / n)] in the GEMM's epilogue:
    uint8 (L, M, N) in [0, m_l), one GEMM launch (K <= MAX_EXACT_K, zero-padded
    to a multiple of 16; N a multiple of 16)."""
    lb, m, k = a.shape
    n = bt.shape[1]
    if k > MAX_EXACT_K:
        raise ValueError(f"int8_matmul_residues: K = {k} > {MAX_EXACT_K}: int32 sums could overflow (cut K first)")
    if n % ALIGN_N_RESIDUES or lb % len(moduli) or len(moduli) > MAX_CRT_MODULI:
        raise ValueError(f"int8_matmul_residues: N = {n} must be a multiple of {ALIGN_N_RESIDUES}, L = {lb} of the "
                         f"number of moduli ({len(moduli)} <= {MAX_CRT_MODULI})")
    a, bt = pad_axis(a, 2, ALIGN_K), pad_axis(bt, 2, ALIGN_K)
    ws = jax.ShapeDtypeStruct((workspace_bytes(lb, m, n, a.shape[2], len(moduli)),), jnp.uint8)
    r, _ = jax.ffi.ffi_call("jaxemu_int8_gemm_residues", (jax.ShapeDtypeStruct((lb, m, n), jnp.uint8), ws))(
        a, bt, moduli=np.asarray(moduli, np.int64))
    return r


def workspace_bytes(lb: int, m: int, n: int, k: int, nmod: int = 0) -> int:
    """Device workspace of the int8 GEMM (L, M, K) x (L, N, K) (stream-K
    partials; a second FFI result), with the residue epilogue of ``nmod``
    moduli if nmod > 0: the most any local GPU's launch needs, since the
    configuration depends on the multiprocessor count."""
    ext = importlib.import_module("jaxemu._jaxemu_cuda")  # present: its kernels are being traced
    return max(ext.int8_workspace_bytes(lb, m, n, k, d.id, nmod) for d in jax.local_devices(backend="cuda"))


def epilogue_reduces(nmod: int) -> bool:
    """Whether the GEMM's epilogue reduces the products of ``nmod`` moduli
    (uint8 residues, one byte each) rather than writing int32 products."""
    return switches.enabled("gemm_residues") and nmod <= MAX_CRT_MODULI


def residue_products(ra, rbt, moduli):
    """Values congruent to the products of the int8 residues ra (n, B, M, K)
    and rbt (n, B, N, K) modulo each m_l, (n, B, M, N): their residues in
    [0, m_l) as uint8, reduced in the GEMM's epilogue (N a multiple of 16, at
    most MAX_CRT_MODULI moduli; switches.py: JAXEMU_CUDA_GEMM_RESIDUES), else
    int32: the raw products (the CRT kernel reduces any int32). One GEMM
    launch per K-piece of at most K_PIECE, every modulus in it; the pieces'
    residues are summed (< 2^8 each) and reduced once more."""
    nm, bsz, m, k = ra.shape
    n = rbt.shape[2]
    ra, rbt = ra.reshape(nm * bsz, m, k), rbt.reshape(nm * bsz, n, k)
    mods = jnp.asarray(moduli, jnp.int32).reshape(nm, 1, 1, 1)
    in_epilogue = epilogue_reduces(nm) and n % ALIGN_N_RESIDUES == 0

    def piece(lo):
        a, b = ra[:, :, lo:lo + K_PIECE], rbt[:, :, lo:lo + K_PIECE]
        if in_epilogue:
            return int8_matmul_residues(a, b, moduli).reshape(nm, bsz, m, n)
        return int8_matmul(a, b).reshape(nm, bsz, m, n)

    if k <= K_PIECE:
        return piece(0)
    total = None
    for lo in range(0, k, K_PIECE):
        p = piece(lo).astype(jnp.int32)
        p = p if in_epilogue else jnp.remainder(p, mods)
        total = p if total is None else total + p  # < 2^8 per piece: no overflow below 2^23 pieces
    return jnp.remainder(total, mods).astype(jnp.uint8) if in_epilogue else total


def crt(p, ea, eb, moduli, dtype=jnp.float32):
    """The CRT kernel: C (B, M, N) of ``dtype`` from raw products p
    (n, B, M, N) int32, or their residues (uint8), and the exponents
    ea (B, M), eb (B, N). float32: the digits'
    double sum rounded once; float64: the exact integer (192-bit) rounded
    once (ffi/int8/crt.cuh)."""
    _, bsz, m, n = p.shape
    return jax.ffi.ffi_call("jaxemu_ozaki2_crt", jax.ShapeDtypeStruct((bsz, m, n), dtype))(
        p, ea, eb, moduli=np.asarray(moduli, np.int64))


def operand_residues(x, e, moduli, transposed: bool, rows_out: int):
    """The residue kernel: int8 (n, B, rows_out, K_out) residues modulo each
    of ``moduli`` of round(x 2^e) (ties to even), K contiguous, zeros past
    the operand (K_out = K rounded up to 16). x is (B, R, K), or (B, K, R)
    when ``transposed`` (B of A B, whose columns are the GEMM's rows); e is
    int32 (B, R), from _ozaki2.exponents."""
    bsz = x.shape[0]
    k = x.shape[1] if transposed else x.shape[2]
    out = jax.ShapeDtypeStruct((len(moduli), bsz, rows_out, -(-k // ALIGN_K) * ALIGN_K), jnp.int8)
    return jax.ffi.ffi_call("jaxemu_ozaki2_residues", out)(
        x, e, moduli=np.asarray(moduli, np.int64), transposed=int(bool(transposed)))


def operand_residues_xla(x, e, moduli, transposed: bool, rows_out: int):
    """operand_residues in plain JAX (the xla backend's integers and
    residues, transposed and padded the same way): the path with
    JAXEMU_CUDA_RESIDUES=0, and the kernel's twin in the CPU tests."""
    xi = jnp.round(_ozaki2.ldexp(x, e[:, None, :] if transposed else e[:, :, None]))
    xi = xi.astype(jnp.int64 if x.dtype == jnp.float64 else jnp.int32)
    if transposed:
        # B's integers transposed once and materialized: fused into the
        # residue pass, each of the n residues would read B column-wise
        # (the residue step took 7.4 of ozaki2_f32's 17.2 ms at 8192^3 on an
        # H100 that way).
        xi = lax.optimization_barrier(jnp.swapaxes(xi, 1, 2))
    widths = ((0, 0), (0, rows_out - xi.shape[1]), (0, (-xi.shape[2]) % ALIGN_K))
    return _ozaki2.symmetric_residues(jnp.pad(xi, widths), moduli)


def residues(a, b, s: Ozaki2, amax=None):
    """The xla backend's integers and moduli for a (B, M, K), b (B, K, N), as
    the kernels take them: (moduli, ra (n, B, M, Kp), rbt (n, B, Np, Kp) int8
    with B transposed, K zero-padded to a multiple of 16 and N to whole
    16-byte rows of uint8 residues (zero columns), ea (B, M, 1), eb (B, 1, N),
    value_bits). ``amax``: as _ozaki2.exponents."""
    moduli, ea, eb, value_bits = _ozaki2.exponents(a, b, s.moduli_for(a.shape[2]), s.MAX_BITS[s.dtype], s.scaling,
                                                   amax)
    # The residue kernel, or XLA's fusions (the same bytes): switches.py.
    res = operand_residues if switches.enabled("residues") else operand_residues_xla
    ra = res(a, ea[:, :, 0], moduli, False, a.shape[1])
    rbt = res(b, eb[:, 0, :], moduli, True, -(-b.shape[2] // ALIGN_N_RESIDUES) * ALIGN_N_RESIDUES)
    return moduli, ra, rbt, ea, eb, value_bits


def ozaki2_finite(a, b, s: Ozaki2, amax=None):
    """Ozaki II on finite canonical operands a (B, M, K), b (B, K, N), both of
    the scheme's dtype: the same integers, residues and moduli as the xla
    backend (so the same C' = A'B'), its products on the int8 tensor cores."""
    s = get_scheme(s)
    xla_backend.check_ozaki2_operands(a, s)
    n = b.shape[2]
    moduli, ra, rbt, ea, eb, value_bits = residues(a, b, s, amax)
    nm = len(moduli)
    # float64 through the CRT kernel unless switched off (switches.py).
    if nm <= MAX_CRT_MODULI and (s.dtype == "float32" or switches.enabled("crt64")):
        eb = pad_axis(eb[:, 0, :], 1, ALIGN_N_RESIDUES)
        bsz, m, npad = ra.shape[1], ra.shape[2], rbt.shape[2]
        per_product = 1 if epilogue_reduces(nm) else 4  # bytes: uint8 residues or int32 products
        block = max(ALIGN_N_RESIDUES,
                    MAX_PRODUCT_BYTES // (per_product * nm * bsz * m) // ALIGN_N_RESIDUES * ALIGN_N_RESIDUES)
        # Column blocks of C, each its products then its CRT (the products of
        # one block are dead before the next block's are written).
        c = jnp.concatenate([crt(residue_products(ra, rbt[:, :, lo:lo + block], moduli), ea[:, :, 0],
                                 eb[:, lo:lo + block], moduli, a.dtype)
                             for lo in range(0, npad, block)], axis=2)
        return c[:, :, :n]
    p = residue_products(ra, rbt, moduli)[..., :n].astype(jnp.int32)  # (n, B, M, N)
    pr = jnp.remainder(p, jnp.asarray(moduli, jnp.int32).reshape(nm, 1, 1, 1))
    return _ozaki2.reconstruct(pr, moduli, value_bits, ea, eb, a.dtype)


def ozaki2_product(a, b, s: Ozaki2):
    """The cuda backend's concrete product for Ozaki II schemes: the xla
    backend's special-value rules around ozaki2_finite."""
    return xla_backend.canonical_dot(a, b, s, "cuda", finite=ozaki2_finite)
