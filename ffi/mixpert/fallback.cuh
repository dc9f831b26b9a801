// MixPert's float fallback (params.h: FallbackProblem), in place on C: the
// products of the tiles that the fixed-point sum leaves out, a_bad b +
// a_good b_bad, in FP32 on the CUDA cores.
//
// On real data few tiles fall back (0.023 % of the tiles on uniform data,
// 0.064 % on normal data, int8_l4) and they are scattered over K, so the
// work is tiny (at 8192^3: ~500 flagged tiles per operand, each 32 x 8192
// multiply-adds) but irregular. Done by XLA as batched thin products with
// static capacities, gathers and sums it cost 1.2 ms at 8192^3 and 7.6 ms
// at K = 1M (docs/performance.md, stop 46); here one warp walks one line's
// flags in K order and does the flagged tiles' multiply-adds directly.
//
// Two kernels, launched in this order:
// - rows: a warp per (row r of A, chunk of columns): for each flagged K-tile
//   t of row r, in increasing t, acc[j] += sum_k a[r, 32 t + k] b[32 t + k, j]
//   (one FMA chain per output), then C[r, j] += acc[j];
// - columns: a warp per (column c of B, chunk of rows): for each flagged
//   K-tile t of column c, acc[i] += sum_k a[i, 32 t + k] b[32 t + k, c] over
//   the rows i whose tile t of A is good (a_bad b is the rows kernel's), then
//   C[i, c] += acc[i].
// Each element of C is written by one lane per kernel, in a fixed order: the
// result is deterministic. Lines without a flagged tile cost one scan of their
// flags.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "params.h"

namespace jaxemu {
namespace mixpert {

constexpr int kFallbackThreads = 256;
constexpr int kRowsCols = 8;   // rows kernel: columns per lane (a warp's chunk: 256 columns)
constexpr int kColsRows = 2;   // columns kernel: rows per lane (a warp's chunk: 64 rows)
constexpr int kScanWords = 4;  // flag words (4 tiles each) per lane in flight while scanning
constexpr unsigned kFullMask = 0xFFFFFFFFu;

// Calls f(t), warp-uniformly, for each K-tile t of a line whose flag is 0
// (it falls back), in increasing t; flags: the line's nt bytes (nt a
// multiple of 4, the line 4-byte aligned). Returns whether it found one.
template <class F>
__device__ __forceinline__ bool for_each_flagged(const uint8_t* flags, int64_t nt, F&& f) {
  const int lane = threadIdx.x % 32;
  constexpr int64_t kStep = 4 * 32 * kScanWords;
  bool found = false;
  for (int64_t t0 = 0; t0 < nt; t0 += kStep) {
    uint32_t bad[kScanWords];
#pragma unroll
    for (int u = 0; u < kScanWords; ++u) {  // all loads first: kScanWords in flight
      const int64_t t = t0 + 128 * u + 4 * lane;
      bad[u] = t < nt ? __vcmpeq4(*reinterpret_cast<const uint32_t*>(flags + t), 0u) : 0u;
    }
#pragma unroll
    for (int u = 0; u < kScanWords; ++u) {
      unsigned lanes = __ballot_sync(kFullMask, bad[u] != 0);
      while (lanes) {
        const int src = __ffs(lanes) - 1;
        lanes &= lanes - 1;
        const uint32_t word = __shfl_sync(kFullMask, bad[u], src);
        found = true;
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if ((word >> (8 * i)) & 0xFFu) f(t0 + 128 * u + 4 * src + i);
      }
    }
  }
  return found;
}

// a_bad b. Items (batch * M rows) x parts, row-major: item (row, part)
// takes the row's column chunks part, part + parts, ...; each warp takes the
// items warp, warp + warps, ... (a few waves of warps: most rows hold no
// flagged tile and cost one scan).
__global__ void __launch_bounds__(kFallbackThreads) fallback_rows_kernel(FallbackProblem p, int64_t parts) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (kFallbackThreads / 32);
  const int64_t nt = p.k / kScaleTile;
  constexpr int64_t kChunk = 32 * kRowsCols;
  for (int64_t item = (int64_t(blockIdx.x) * kFallbackThreads + threadIdx.x) / 32; item < p.batch * p.m * parts;
       item += warps) {
    const int64_t line = item / parts, l = line / p.m;  // line: batch * M + row
    const uint8_t* flags = p.ok_a + line * nt;
    const float* a_row = p.a + line * p.k;
    const float* b = p.b + l * p.k * p.n;
    float* c_row = p.c + line * p.n;
    for (int64_t j0 = (item % parts) * kChunk; j0 < p.n; j0 += parts * kChunk) {
      float acc[kRowsCols] = {};
      const bool any = for_each_flagged(flags, nt, [&](int64_t t) {
        const float av = a_row[t * kScaleTile + lane];
        const float* bt = b + t * kScaleTile * p.n + j0 + lane;
#pragma unroll 4
        for (int k = 0; k < kScaleTile; ++k) {
          const float ak = __shfl_sync(kFullMask, av, k);
#pragma unroll
          for (int q = 0; q < kRowsCols; ++q)
            if (j0 + lane + 32 * q < p.n) acc[q] = fmaf(ak, bt[k * p.n + 32 * q], acc[q]);
        }
      });
      if (!any) break;  // no flagged tile in this row
#pragma unroll
      for (int q = 0; q < kRowsCols; ++q)
        if (j0 + lane + 32 * q < p.n) c_row[j0 + lane + 32 * q] += acc[q];
    }
  }
}

// a_good b_bad. Items (batch * N columns) x parts, as the rows kernel's:
// item (column, part) takes the column's row chunks part, part + parts, ...
__global__ void __launch_bounds__(kFallbackThreads) fallback_columns_kernel(FallbackProblem p, int64_t parts) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (kFallbackThreads / 32);
  const int64_t nt = p.k / kScaleTile;
  constexpr int64_t kChunk = 32 * kColsRows;
  for (int64_t item = (int64_t(blockIdx.x) * kFallbackThreads + threadIdx.x) / 32; item < p.batch * p.n * parts;
       item += warps) {
    const int64_t line = item / parts, l = line / p.n, col = line % p.n;  // line: batch * N + column
    const uint8_t* flags = p.ok_bt + line * nt;
    const uint8_t* ok_a = p.ok_a + l * p.m * nt;
    const float* b_col = p.b + l * p.k * p.n + col;
    const float* a = p.a + l * p.m * p.k;
    float* c_col = p.c + l * p.m * p.n + col;
    for (int64_t i0 = (item % parts) * kChunk; i0 < p.m; i0 += parts * kChunk) {
      float acc[kColsRows] = {};
      const bool any = for_each_flagged(flags, nt, [&](int64_t t) {
        // All loads first, none waiting on another: the rows' A tiles (row
        // index clamped; rows past M and A's bad tiles are masked below),
        // their flags and the column's 32 values of B.
        float4 x[kColsRows][kScaleTile / 4];
        bool good[kColsRows];
#pragma unroll
        for (int q = 0; q < kColsRows; ++q) {
          const int64_t i = min(i0 + lane + 32 * q, p.m - 1);
          good[q] = i0 + lane + 32 * q < p.m && ok_a[i * nt + t];  // A's bad tiles: the rows kernel's
          const float4* ai = reinterpret_cast<const float4*>(a + i * p.k + t * kScaleTile);
#pragma unroll
          for (int v = 0; v < kScaleTile / 4; ++v) x[q][v] = ai[v];
        }
        const float bv = b_col[(t * kScaleTile + lane) * p.n];
        float bk[kScaleTile];  // the tile's 32 values of B, in every lane
#pragma unroll
        for (int k = 0; k < kScaleTile; ++k) bk[k] = __shfl_sync(kFullMask, bv, k);
#pragma unroll
        for (int q = 0; q < kColsRows; ++q) {
          if (!good[q]) continue;
          float s = acc[q];
#pragma unroll
          for (int v = 0; v < kScaleTile / 4; ++v) {
            s = fmaf(x[q][v].x, bk[4 * v], s);
            s = fmaf(x[q][v].y, bk[4 * v + 1], s);
            s = fmaf(x[q][v].z, bk[4 * v + 2], s);
            s = fmaf(x[q][v].w, bk[4 * v + 3], s);
          }
          acc[q] = s;
        }
      });
      if (!any) break;  // no flagged tile in this column
#pragma unroll
      for (int q = 0; q < kColsRows; ++q)
        if (i0 + lane + 32 * q < p.m) c_col[(i0 + lane + 32 * q) * p.n] += acc[q];
    }
  }
}

}  // namespace mixpert
}  // namespace jaxemu
