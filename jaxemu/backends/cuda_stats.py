"""auto's data test on the GPU: the statistics of each operand in one pass
(ffi/stats), in place of XLA's reductions, which made three to four fusions
of A's, one writing a mask for the others to read, and an is-finite copy of
B (docs/performance.md, stops 25-26). The same statistics as
jaxemu/auto.py: operand_stats; the sums in another, fixed, order whose
error bound is known: ~K / 256 roundings for the probe (``probe_roundings``),
where XLA's float32 reductions guarantee only K."""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import StatsKernels, b_rows_are_free, cuda_fused, xla


def row_lanes(k: int, itemsize: int) -> int:
    """Threads per row of the row kernel for rows of k values (below 4096;
    longer rows take a block each): about four 16-byte loads per thread in
    flight, in a group of 4 to 32 lanes (the k-means distances' rows of 256
    float32: 16 lanes, two rows per warp)."""
    vectors = -(-k * itemsize // 16)
    lanes = 4
    while lanes < 32 and lanes * 4 < vectors:
        lanes *= 2
    return lanes


def rows(a, v: Optional[jnp.ndarray] = None, lanes: Optional[int] = None):
    """Per row of a (B, R, K) (float32, float16 or bfloat16), over its finite
    values (NaN/Inf count as 0): max |a|, min of the nonzero |a| (inf for
    none), sum |a|, then 1.0 where the row holds a NaN or +-Inf (else 0);
    with the probe v (B, K) (float32, finite), of t = a v: sum t, sum |t|,
    max |t|, sum |t|^(1/8). Each (B, R) float32. ``lanes``: threads per row
    (4, 8, 16, 32; default ``row_lanes``)."""
    n = 4 if v is None else 8
    if a.shape[2] == 0:  # (the kernel tells a probe by v's values: none here)
        z = jnp.zeros(a.shape[:2], jnp.float32)
        return (z, z + jnp.inf) + (z,) * (n - 2)
    lanes = row_lanes(a.shape[2], a.dtype.itemsize) if lanes is None else int(lanes)
    out = jax.ffi.ffi_call("jaxemu_row_stats", jax.ShapeDtypeStruct((n,) + a.shape[:2], jnp.float32))(
        a, jnp.zeros((0,), jnp.float32) if v is None else v.astype(jnp.float32), lanes=np.int64(lanes))
    return tuple(out[i] for i in range(n))


MAX_COLUMN_BATCH = 65535  # the column kernel's batch is its grid's z (ffi/stats_dispatch.cu)
MIN_CHUNK_ROWS = 32  # rows of B per block of the column kernel, at least


def column_chunks(bsz: int, k: int, n: int) -> int:
    """Slices of K whose partial column statistics the first launch makes:
    about 1024 blocks in all (a few waves on 132 SMs), each of >= 32 rows
    (two of a block's 16-row steps). (At >= 256 rows, a 2048 x 2048 B made
    64 blocks: 20 us on an H200, latency-bound, auto's largest cost at
    2048^3; docs/performance.md, stop 31.) A function of the shape alone:
    the same bits on every run."""
    strips = -(-n // 256)
    return int(max(1, min(-(-k // MIN_CHUNK_ROWS), -(-1024 // (strips * max(bsz, 1))), 65535)))


def columns(b):
    """Per column of b (B, K, N) (float32, float16 or bfloat16), over its
    finite values: max |b|, min of the nonzero |b| (inf for none), sum |b|,
    then 1.0 where the column holds a NaN or +-Inf (else 0). Each (B, N)
    float32. Where B is the transpose of an array laid out (B, N, K) (x @ y.T:
    backends.b_rows_free), as the rows of B^T by the row kernel, which reads
    that array as it lies; the column kernel would need XLA's transposed
    copy first (kNN, per chunk: 0.29 ms, then 0.45 ms in the column kernel;
    H200, docs/performance.md stop 37). The same statistics, the sums of
    |b| in another order."""
    if b_rows_are_free():
        return rows(jnp.swapaxes(b, 1, 2))
    bsz, k, n = b.shape
    if bsz > MAX_COLUMN_BATCH:  # the grid's z dimension: XLA's reductions
        return xla.finite_extremes(b.astype(jnp.float32), 1)
    chunks = column_chunks(bsz, k, n)
    _, out = jax.ffi.ffi_call("jaxemu_col_stats", (jax.ShapeDtypeStruct((chunks, 4, bsz, n), jnp.float32),
                                                   jax.ShapeDtypeStruct((4, bsz, n), jnp.float32)))(b)
    return tuple(out[i] for i in range(4))


def probe_roundings(k: int) -> int:
    """The row kernel's error bound on the probe's sums (sum a v, sum |a v|)
    in units of float32's unit roundoff, per unit of sum |a v|, where XLA's
    float32 sums take K (auto.DataTest). A thread adds its values in
    sequence: from K = 4096, 256 threads per row take 16-byte vectors in
    turn (up to 8 values each: ceil(K / 2048) vectors of 8 values at most);
    below, at least 4 lanes take K / 4 values and at most one vector more;
    then at most 5 shuffle levels and 7 sequential merges of warp partials,
    and one rounding of each product a v: ceil(K / 2048) * 8 + 14 from 4096
    (4110 at the k-means update's 2^20, 2.4e-4), ceil(K / 4) + 14 below."""
    k = int(k)
    return (-(-k // 2048) * 8 if k >= 4096 else -(-k // 4)) + 14


# (split_rows: the split kernel's stats form sums a row in chains no longer
# than rows' kernel's (a warp per row: at most 64 values per lane, then at
# most 5 xor levels; a block per row past K = 2048: ceil(K / 2048) 8 values
# per thread, then 8 levels), so probe_roundings bounds its sums too.)
KERNELS = StatsKernels(rows=rows, columns=columns, probe_roundings=probe_roundings,
                       split_rows=cuda_fused.split_rows_with_stats)
