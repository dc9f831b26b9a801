"""Environment switches of the cuda backend's kernels, read when a product
is lowered. JAX caches lowerings: a function jitted again after a switch
changes may reuse the old one (jax.clear_caches() drops them).

Every kernel runs by default once a GPU run has passed its tests; a kernel
written since, verified on the CPU only, would start opt-in here. Each
switch turns one kernel off ("0") and names the path that then runs instead,
which stays available for comparison and as a fallback the user chooses.

| switch | kernel | off ("0"): instead | verified on a GPU |
|---|---|---|---|
| JAXEMU_CUDA_INT8 | Ozaki II's int8 GEMM and float32 CRT | the xla backend's ozaki2 | H100, 2026-11-25 |
| JAXEMU_CUDA_SPLIT | the fused path's operand split | XLA's split fusions | H100, 2026-11-25 |
| JAXEMU_CUDA_RESIDUES | Ozaki II's residues | XLA's residue fusions | H100, 2026-11-25 |
| JAXEMU_CUDA_CRT64 | the CRT kernel's float64 output (ozaki2_f64) | XLA's exact limbs | H100, 2026-11-25 |
| JAXEMU_CUDA_GEMM_RESIDUES | Ozaki II's products reduced mod m_l in the int8 GEMM's epilogue (uint8) | int32 products, reduced by the CRT kernel | H200, 2026-11-26 |
| JAXEMU_CUDA_STATS | auto's operand statistics (ffi/stats), float64 probe sums | XLA's reductions (float32 probe bound) | H100 and H200, 2026-11-26 |
| JAXEMU_CUDA_F32_REGISTER_A | the FP32-operand kernels with A's slices in registers (wgmma's RS form: A's slices never cross shared memory; the same bits, 8-15 % faster) | A's slices in shared memory | H200, 2026-11-27 |
| JAXEMU_CUDA_B_ROWS | B's split by the rows kernel, as the rows of B^T, where B is the transpose of a (N, K) array (x @ y.T; "1": on every B, XLA transposing it first) | the transposed split kernel on B | H200, 2026-11-27 |
| JAXEMU_CUDA_DEVICE_SPECIALS | the slice path's special values on the device: a fix-up in the GEMM's own call tests max |A|, max |B| and, where they fail, gives C's values that are not finite their FP32 value (no conditional; launches without K-splits, no exact operand) | the same test on the host, a conditional | H200, 2026-11-28 |
| JAXEMU_CUDA_HOIST_SPLITS | a scan's loop-invariant dot operand (kNN's database, k-means' points) split once, before the loop, by emulate (jaxemu/hoist.py), where the slice path reads it | the split in every iteration (XLA on the GPU does not hoist it) | H200, 2026-11-28 |
| JAXEMU_CUDA_HOIST_STATS | auto's column statistics of a scan's loop-invariant B (kNN's database, X in the k-means update) taken once, before the loop, by emulate (jaxemu/hoist.py) | the statistics in every iteration | H200, 2026-11-28 |
| JAXEMU_CUDA_MIXPERT | MixPert's levels (int8_l1..l4) on the MixPert kernel (ffi/mixpert/), the float fallback's products over only the tiles, or the rows and columns, holding a fallback tile: int8_l4 1.40x SGEMM at 8192^3 against the xla backend's 0.07x, same run (stop 45; 1.86x with the fallback tile by tile, stop 46) | the xla backend's int8 levels | H200, 2026-11-29 (tests/test_cuda_mixpert.py) |
| JAXEMU_CUDA_MIXPERT_FALLBACK | MixPert's fallback kernel (ffi/mixpert/fallback.cuh: the flagged tiles' FP32 multiply-adds on the CUDA cores, a warp walking each row of A and column of B in K order, in place on C) where at most 1/64 of the tiles, and max(64, K/2048) per row or column, fall back: the k-means update (1024 x 1M x 256) int8_l4 1.06x SGEMM against 0.64x, distances 1.15x against 0.95x, 8192^3 1.89x against 1.88x, same run (stop 47) | the XLA routes: tile by tile, gathered, whole | H200, 2026-11-29 (tests/test_cuda_mixpert.py) |
| JAXEMU_CUDA_MIXPERT_FALLBACK_TILES | the fallback kernel's rows of A and columns of B with a single flagged tile taken K-tile by K-tile (a block per K-tile and chunk reads the other operand's slab once for all of them; cuda_mixpert.fallback_tiles: M and N >= 512, K <= 65536; "1": both sides everywhere), the same bits: at 8192^3 the fallback 1.74 -> 1.50 ms (normal data), int8_l4 1.88x -> 1.93x SGEMM, int8_l1 2.56x -> 2.69x (stop 49) | every flagged line walked by its own warp (each flagged tile reads its slab again) | H200, 2026-11-29 (tests/test_cuda_mixpert.py) |
| JAXEMU_CUDA_MIXPERT_THREE_WARPGROUPS | the MixPert kernel with three consumer warpgroups (192 x 64 tiles) where the shape's waves of tiles favour them (ffi/mixpert_dispatch.cu; "1": on every shape), the same bits: the kernel 4-8 % faster at 8192^3 (stop 51) | two consumer warpgroups (128 x 64 tiles) on every shape | H200, 2026-11-30 (tests/native/kernel_check.cu: C's hashes on 9 shapes, memcheck) |
| JAXEMU_CUDA_MIXPERT_SPARSE | MixPert's fallback tile by tile (cuda_mixpert.sparse_fallback: per K-tile, its flagged rows of A times B's K-tile and A's good K-tile times its flagged columns of B, thin FP32 products summed per row and column) where few tiles fall back per K-tile and per row or column: int8_l4 1.86x SGEMM at 8192^3 against 1.40x with the gathered rows, same run (stop 46) | the gathered rows and columns, or the whole products | H200, 2026-11-29 (tests/test_cuda_mixpert.py) |
| JAXEMU_CUDA_MIXPERT_SPLIT | the MixPert split (ffi/mixpert/split.cuh): one pass over each operand writing the kernel's layout, exponents and flags | XLA's split (xla.int8_tile_stats) and cuda_mixpert.pack | H200, 2026-11-29 (tests/test_cuda_mixpert.py) |
| JAXEMU_CUDA_F32_SCALES_IN_KERNEL | fp16x3's row and column exponents found in the FP32-operand kernel (its own configuration, f32ek_fp16_s2_t1_2), each from its first nonzero K-tile of a work item with cuda_fused.F32_EXP_HEADROOM binades to spare (ffi/fused/transform.cuh: choose_rows; a value past the headroom, or a special value, leaves an entry of C not finite, and the product is redone with the passes' exponents: cuda_fused.f32_product), instead of an XLA pass over each operand first: the k-means update with dense operands (1024 x 2^20 x 256) 3.99 ms against 5.14, 2.61x SGEMM on normal data, 2.56x on values spread over 33 binades; 9.53 ms where the redo runs (one row of B 2^20 times larger), same run (stop 53) | the passes | H200, 2026-11-30 (tests/test_cuda_f32.py: 138 passed); on by default since stop 54 where the passes it saves read >= 1 GiB (cuda_fused.f32_scales_in_kernel; "1": on every fp16x3 product the kernel runs) (H200, 2026-11-30: tests/test_cuda.py whole with it on, 167 passed and one stale assertion about int8_l4's backend, mended; tests/test_cuda_f32.py 138 passed; compute-sanitizer memcheck of the configuration: 0 errors) |
| JAXEMU_CUDA_SPLIT_EXPS | fp16's row exponents (fp16x3, fp16x3_bitcut) found by the split kernel in its one read of an operand (rows of up to 2048 values, not transposed: 8 to 32 lanes of a warp per row hold it in registers, reduce its largest finite |x|, then split it; ffi/fused_dispatch.cu: split_rows_exp_kernel), instead of an XLA reduction over the operand first (k-means' distances: A is 1 GiB, ~0.25 ms of fp16x3's 4.4 ms, docs/performance.md stop 23's profile) | the XLA reduction, then the split | H200, 2026-11-30: tests/test_cuda.py's fp16x3 tests with it on, kernel_check's split family under memcheck and racecheck, the same slices and exponents as with given ones (k-means distances 2.69x -> 3.04x SGEMM, one call) |
| JAXEMU_CUDA_SPLIT_STATS | auto's row statistics of A taken by fp16x3's split of A in the same read (the split that finds the row exponents, rows of up to 8192 values: a warp per row to 2048, a block past; ffi/fused_dispatch.cu: split_rows_exp_kernel's stats form), and fp16x3's branch reading that split, where auto's plan puts fp16x3 first on the slice path. By default only where A has >= auto.PROBE_B_RATIO times B's columns: the split sums A's four extremes and a row of A probes B's columns (k-means' distances, 2^20 x 256 x 1024: auto over fp16x3 1.02 against 1.08 with the statistics' own pass, same call, stop 58); "1": everywhere it can, the probe's sums in A's split too (slower end to end in stops 56-58) | the statistics kernel's pass over A, then fp16x3's split in its branch | H200, 2026-11-30 (stop 58): kernel_check's split family (173 cases, each stats case also with the extremes alone) plain and under memcheck; tests/test_cuda.py |
| JAXEMU_CUDA_DEVICE_CHOICE | auto's choice made on the device (docs/auto.md, "The choice on the device"): every candidate's kernels launched behind a gate that the data test's choice opens for one of them (cuda_gated.py; fp16x3, bf16x6 on the slice path, jaxemu's FP32 GEMM; no hybrids), instead of a conditional whose predicate the host waits for, on products of up to auto.DEVICE_CHOICE_MAX_FLOPS | the conditional | H200, 2026-12-01 (stop 60): kernel_check's gated cases plain and under memcheck, the GPU gate tests; opt-in ("1") because it measured no faster than the conditional (2048^3 1.40-2.50 of fp16x3 against 1.32-2.13; the call is bound by its launches) |
| JAXEMU_CUDA_F32_OPERANDS | bf16 schemes, fp16x3 and tf32x3 on FP32 operands, split in the GEMM's shared memory (ffi/fused/kernel_f32.cuh), where cuda_fused.f32_kernel says they pay (bf16: up to two waves of tiles; tf32x3: one, its B transposed by the cut; fp16x3: small M N / (M + N)) ("1": wherever it can run) | the split kernel, then the slice GEMM | H200, 2026-11-27 (bf16); 2026-12-01 (tf32x3: the k-means update 1.72x SGEMM against 0.84x, tests/test_cuda_f32.py 168 passed) |

(H100 80GB HBM3 or H200, jax 0.11.2, CUDA 13: tests/test_cuda.py, tests/test_cuda_int8.py
and tests/native/kernel_check.cu under compute-sanitizer; docs/testing.md.)
"""
from __future__ import annotations

import os

_SWITCHES = {"int8": "JAXEMU_CUDA_INT8", "split": "JAXEMU_CUDA_SPLIT", "residues": "JAXEMU_CUDA_RESIDUES",
             "crt64": "JAXEMU_CUDA_CRT64", "stats": "JAXEMU_CUDA_STATS", "gemm_residues": "JAXEMU_CUDA_GEMM_RESIDUES",
             "f32_operands": "JAXEMU_CUDA_F32_OPERANDS", "f32_register_a": "JAXEMU_CUDA_F32_REGISTER_A",
             "b_rows": "JAXEMU_CUDA_B_ROWS", "device_specials": "JAXEMU_CUDA_DEVICE_SPECIALS",
             "hoist_splits": "JAXEMU_CUDA_HOIST_SPLITS", "hoist_stats": "JAXEMU_CUDA_HOIST_STATS",
             "mixpert": "JAXEMU_CUDA_MIXPERT", "mixpert_split": "JAXEMU_CUDA_MIXPERT_SPLIT",
             "mixpert_sparse": "JAXEMU_CUDA_MIXPERT_SPARSE", "mixpert_fallback": "JAXEMU_CUDA_MIXPERT_FALLBACK",
             "mixpert_fallback_tiles": "JAXEMU_CUDA_MIXPERT_FALLBACK_TILES",
             "mixpert_three_warpgroups": "JAXEMU_CUDA_MIXPERT_THREE_WARPGROUPS",
             "f32_scales_in_kernel": "JAXEMU_CUDA_F32_SCALES_IN_KERNEL", "split_exps": "JAXEMU_CUDA_SPLIT_EXPS",
             "split_stats": "JAXEMU_CUDA_SPLIT_STATS", "device_choice": "JAXEMU_CUDA_DEVICE_CHOICE"}
OPT_IN: set = {"device_choice"}  # switches whose kernel runs only when set to "1"


def enabled(kernel: str) -> bool:
    """Whether a kernel (a key of _SWITCHES) runs: unless its switch is "0"
    (an opt-in one: only when it is "1")."""
    if kernel in OPT_IN:
        return os.environ.get(_SWITCHES[kernel], "0") == "1"
    return os.environ.get(_SWITCHES[kernel], "1") != "0"


def forced(kernel: str) -> bool:
    """Whether a kernel's switch is "1": it runs wherever it can, not only
    where the backend's policy finds that it pays (for comparisons)."""
    return os.environ.get(_SWITCHES[kernel]) == "1"


def variable(kernel: str) -> str:
    """The environment variable of a kernel's switch."""
    return _SWITCHES[kernel]


def switches() -> dict:
    """kernel -> (environment variable, on), for info()."""
    return {k: (v, enabled(k)) for k, v in _SWITCHES.items()}
