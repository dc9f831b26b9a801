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
// Per side, the line-by-line kernel, and where it goes tile by tile, the
// tile kernel and the listing kernel before it (rows, then columns):
// - rows, line by line: a warp per (row r of A, chunk of columns): for each
//   flagged K-tile t of row r, in increasing t, acc[j] += sum_k a[r, 32 t +
//   k] b[32 t + k, j] (one FMA chain per output), then C[r, j] += acc[j];
// - columns, line by line: a warp per (column c of B, chunk of rows): for
//   each flagged K-tile t of column c, acc[i] += sum_k a[i, 32 t + k] b[32 t
//   + k, c] over the rows i whose tile t of A is good (a_bad b is the rows
//   side's), then C[i, c] += acc[i];
// - where the problem says so (rows_tiles, columns_tiles), the lines with
//   exactly one flagged tile (most flagged lines at K <= 64K: the flagged
//   share is ~0.02-0.07 %) go K-tile by K-tile instead: a block per K-tile t
//   and chunk of the other dimension holds that chunk's slab of t in
//   registers, read once, and serves every such line flagged in t from it.
//   Line by line, each flagged tile reads its slab anew: at 8192^3 on normal
//   data ~1.3 GB per side from DRAM in random K order, 0.5 + 1.2 ms (stop
//   48), against the 256 MB of one operand. The line-by-line kernels then
//   walk only the lines with several flagged tiles (multi_lines_kernel's
//   list). The sums are the same FMA chains: the same bits.
// Each element of C is written by one thread per kernel and side, in a fixed
// order: the result is deterministic. Lines without a flagged tile cost one
// scan of their flags.
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
constexpr int kTileThreads = 256;                      // tile kernels: a thread per column (rows) or row (columns)
constexpr int kPassLines = kTileThreads * kFlagPad;    // flagged lines of one K-tile gathered per pass (4096)
constexpr int kStageLines = 32;                        // gathered lines whose 32 values are staged at a time

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

// The flagged tiles of a line (its nt flag bytes, as for_each_flagged's),
// counted up to 2; warp-uniform.
__device__ __forceinline__ int flagged_upto_two(const uint8_t* flags, int64_t nt) {
  const int lane = threadIdx.x % 32;
  constexpr int64_t kStep = 4 * 32 * kScanWords;
  int count = 0;
  for (int64_t t0 = 0; t0 < nt && count < 2; t0 += kStep) {
    int bad = 0;
#pragma unroll
    for (int u = 0; u < kScanWords; ++u) {
      const int64_t t = t0 + 128 * u + 4 * lane;
      if (t < nt) bad += __popc(__vcmpeq4(*reinterpret_cast<const uint32_t*>(flags + t), 0u)) / 8;
    }
    count += __reduce_add_sync(kFullMask, bad);
  }
  return min(count, 2);
}

// Where a side's tile kernel ran: into list (count: its length, zeroed
// before) the side's lines (flags: nt each, `lines` of them, the batch's
// included) with two or more flagged tiles, a warp per line; the
// line-by-line kernel then walks only those, every chunk of the other
// dimension in parallel. (Scanning every line from each of its 16 items
// cost ~0.13 ms per side at 8192^3, beside the walks themselves.) The
// list's order is arbitrary; each line's result does not depend on it.
__global__ void __launch_bounds__(kFallbackThreads) multi_lines_kernel(const uint8_t* flags, int64_t lines, int64_t nt,
                                                                       int32_t* list, int32_t* count) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (kFallbackThreads / 32);
  for (int64_t line = (int64_t(blockIdx.x) * kFallbackThreads + threadIdx.x) / 32; line < lines; line += warps)
    if (flagged_upto_two(flags + line * nt, nt) == 2 && lane == 0) list[atomicAdd(count, 1)] = int32_t(line);
}

// The lines of a line-by-line kernel: all of them (list null), or those
// multi_lines_kernel listed.
struct Lines {
  const int32_t* list = nullptr;
  const int32_t* count = nullptr;
  int64_t all = 0;
  __device__ __forceinline__ int64_t size() const { return list ? int64_t(*count) : all; }
  __device__ __forceinline__ int64_t operator[](int64_t i) const { return list ? int64_t(list[i]) : i; }
};

// a_bad b, line by line. Items (rows of A: batch * M, or the listed ones) x
// parts, row-major: item (row, part) takes the row's column chunks part,
// part + parts, ...; each warp takes the items warp, warp + warps, ... (a
// few waves of warps: most rows hold no flagged tile and cost one scan).
__global__ void __launch_bounds__(kFallbackThreads) fallback_rows_kernel(FallbackProblem p, int64_t parts, Lines rows) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (kFallbackThreads / 32);
  const int64_t nt = p.k / kScaleTile, items = rows.size() * parts;
  constexpr int64_t kChunk = 32 * kRowsCols;
  for (int64_t item = (int64_t(blockIdx.x) * kFallbackThreads + threadIdx.x) / 32; item < items; item += warps) {
    const int64_t line = rows[item / parts], l = line / p.m;  // line: batch * M + row
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

// a_good b_bad, line by line. Items (columns of B: batch * N, or the listed
// ones) x parts, as the rows kernel's: item (column, part) takes the
// column's row chunks part, part + parts, ...
__global__ void __launch_bounds__(kFallbackThreads) fallback_columns_kernel(FallbackProblem p, int64_t parts,
                                                                            Lines columns) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (kFallbackThreads / 32);
  const int64_t nt = p.k / kScaleTile, items = columns.size() * parts;
  constexpr int64_t kChunk = 32 * kColsRows;
  for (int64_t item = (int64_t(blockIdx.x) * kFallbackThreads + threadIdx.x) / 32; item < items; item += warps) {
    const int64_t line = columns[item / parts], l = line / p.n, col = line % p.n;  // line: batch * N + column
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

// Into list: the lines of [s0, s0 + kPassLines) flagged in one K-tile
// (flags_t: the K-tile's row of ok_at or ok_b, `padded` bytes, the padding
// 1) that hold no other flagged tile; -1 in place of the others (theirs is
// the line-by-line kernel's). line_flags: the lines' own flags, nt each.
// Block-wide; returns the list's length, the same in every thread. The
// order of the list is arbitrary: each line's result does not depend on it.
__device__ __forceinline__ int gather_single_lines(const uint8_t* flags_t, int64_t padded, int64_t s0,
                                                   const uint8_t* line_flags, int64_t nt, int* list, int* count) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) *count = 0;
  __syncthreads();  // (also: the last pass's list is no longer read)
  const int64_t base = s0 + int64_t(threadIdx.x) * kFlagPad;
  uint4 w = make_uint4(0x01010101u, 0x01010101u, 0x01010101u, 0x01010101u);
  if (base < padded) w = *reinterpret_cast<const uint4*>(flags_t + base);
  const uint32_t z[4] = {__vcmpeq4(w.x, 0u), __vcmpeq4(w.y, 0u), __vcmpeq4(w.z, 0u), __vcmpeq4(w.w, 0u)};
  if (z[0] | z[1] | z[2] | z[3]) {
#pragma unroll
    for (int i = 0; i < kFlagPad; ++i)
      if ((z[i / 4] >> (8 * (i % 4))) & 0xFFu) list[atomicAdd(count, 1)] = int(base + i);
  }
  __syncthreads();
  const int found = *count;
  for (int e = warp; e < found; e += kTileThreads / 32) {
    const int line = list[e];
    if (flagged_upto_two(line_flags + int64_t(line) * nt, nt) != 1 && lane == 0) list[e] = -1;
  }
  __syncthreads();
  return found;
}

// The tile kernels' items: (batch l, K-tile t, chunk of kTileThreads lines of
// the other dimension, segment of the flagged lines' scan), the segment
// fastest (the blocks of one slab run side by side). Segments are more than
// one only where the other items are too few to fill the GPU (each reads
// its slab again).
struct TileItem {
  int64_t l, t, chunk, first_pass, end_pass;
  __device__ __forceinline__ TileItem(int64_t nt, int64_t chunks, int64_t segments, int64_t passes) {
    const int64_t item = blockIdx.x, segment = item % segments, per_segment = (passes + segments - 1) / segments;
    chunk = item / segments % chunks;
    t = item / (segments * chunks) % nt;
    l = item / (segments * chunks * nt);
    first_pass = segment * per_segment;
    end_pass = min(passes, first_pass + per_segment);
  }
};

// The tile kernels' walk of one item: for each pass of its segment, the
// lines of one side flagged in K-tile t alone (gather_single_lines; flags:
// the side's transposed flags, `lines` per K-tile before the padding;
// line_flags: the lines' own flags, nt each); at the first pass that finds
// one, load() (the thread's part of the other operand's slab); then,
// kStageLines lines at a time, each line's 32 values value(line, k) staged
// in shared memory by one warp (lane k), and add(values, line) in every
// thread, for each line in turn.
template <class Load, class Value, class Add>
__device__ __forceinline__ void for_each_single_line(const TileItem& it, int64_t nt, int64_t lines, const uint8_t* flags,
                                                     const uint8_t* line_flags, Load&& load, Value&& value, Add&& add) {
  __shared__ int list[kPassLines];
  __shared__ float vals[kStageLines][kScaleTile];
  __shared__ int count;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t padded = padded_flags(lines);
  const uint8_t* flags_t = flags + (it.l * nt + it.t) * padded;
  bool loaded = false;
  for (int64_t pass = it.first_pass; pass < it.end_pass; ++pass) {
    const int found = gather_single_lines(flags_t, padded, pass * kPassLines, line_flags, nt, list, &count);
    if (found == 0) continue;
    if (!loaded) {
      load();
      loaded = true;
    }
    for (int e0 = 0; e0 < found; e0 += kStageLines) {
      const int staged = min(found - e0, kStageLines);
      for (int e = warp; e < staged; e += kTileThreads / 32) {
        const int line = list[e0 + e];
        vals[e][lane] = line >= 0 ? value(line, lane) : 0.f;
      }
      __syncthreads();
      for (int e = 0; e < staged; ++e) {
        const int line = list[e0 + e];
        if (line >= 0) add(vals[e], line);
      }
      __syncthreads();
    }
  }
}

// The passes of a side's scan of `lines` flags (kPassLines lines each).
__host__ __device__ __forceinline__ int64_t tile_passes(int64_t lines) {
  return (padded_flags(lines) + kPassLines - 1) / kPassLines;
}

// a_bad b for the rows of A with exactly one flagged tile, K-tile by K-tile.
// A block per item; a thread per column j of the chunk holds b[32 t + k, j]
// (k < 32) in registers, loaded once, at the first flagged row; the rows of
// the segment flagged in t are gathered from A's transposed flags; their 32
// values of A are staged in shared memory kStageLines at a time; each
// thread adds acc = sum_k a[r, 32 t + k] b[32 t + k, j] (the line-by-line
// kernel's FMA chain) to C[r, j].
__global__ void __launch_bounds__(kTileThreads, 3) fallback_rows_tiles_kernel(FallbackProblem p, int64_t segments) {
  const int64_t nt = p.k / kScaleTile, chunks = (p.n + kTileThreads - 1) / kTileThreads;
  const TileItem it(nt, chunks, segments, tile_passes(p.m));
  const int64_t j = it.chunk * kTileThreads + threadIdx.x;
  const float* a = p.a + it.l * p.m * p.k + it.t * kScaleTile;
  float* c = p.c + it.l * p.m * p.n + j;
  float bk[kScaleTile];
  for_each_single_line(
      it, nt, p.m, p.ok_at, p.ok_a + it.l * p.m * nt,
      [&] {  // column j of B's slab: 32 loads in flight
        const float* b = p.b + (it.l * p.k + it.t * kScaleTile) * p.n + j;
#pragma unroll
        for (int k = 0; k < kScaleTile; ++k) bk[k] = j < p.n ? b[k * p.n] : 0.f;
      },
      [&](int row, int k) { return a[int64_t(row) * p.k + k]; },
      [&](const float* av, int row) {
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < kScaleTile; ++k) acc = fmaf(av[k], bk[k], acc);
        if (j < p.n) c[int64_t(row) * p.n] += acc;
      });
}

// a_good b_bad for the columns of B with exactly one flagged tile, K-tile
// by K-tile, as fallback_rows_tiles_kernel: a thread per row i of the chunk
// holds a[i, 32 t + k] (k < 32) and whether A's tile t of row i is good; the
// columns of the segment flagged in t are gathered from B's flags, their
// 32 values staged; each thread adds sum_k a[i, 32 t + k] b[32 t + k, c]
// (the line-by-line kernel's FMA chain), or 0 where A's tile is bad (as
// that kernel does), to C[i, c].
__global__ void __launch_bounds__(kTileThreads, 3) fallback_columns_tiles_kernel(FallbackProblem p, int64_t segments) {
  const int64_t nt = p.k / kScaleTile, chunks = (p.m + kTileThreads - 1) / kTileThreads;
  const TileItem it(nt, chunks, segments, tile_passes(p.n));
  const int64_t i = it.chunk * kTileThreads + threadIdx.x, row = it.l * p.m + min(i, p.m - 1);
  const float* b = p.b + (it.l * p.k + it.t * kScaleTile) * p.n;
  float* c = p.c + row * p.n;
  float4 x[kScaleTile / 4];
  bool good = false;
  for_each_single_line(
      it, nt, p.n, p.ok_b, p.ok_bt + it.l * p.n * nt,
      [&] {  // row i's tile t of A (the row clamped; rows past M write nothing)
        good = i < p.m && p.ok_a[row * nt + it.t];
        const float4* ar = reinterpret_cast<const float4*>(p.a + row * p.k + it.t * kScaleTile);
#pragma unroll
        for (int v = 0; v < kScaleTile / 4; ++v) x[v] = ar[v];
      },
      [&](int col, int k) { return b[int64_t(k) * p.n + col]; },
      [&](const float* bv, int col) {
        float s = 0.f;
#pragma unroll
        for (int v = 0; v < kScaleTile / 4; ++v) {
          s = fmaf(x[v].x, bv[4 * v], s);
          s = fmaf(x[v].y, bv[4 * v + 1], s);
          s = fmaf(x[v].z, bv[4 * v + 2], s);
          s = fmaf(x[v].w, bv[4 * v + 3], s);
        }
        if (i < p.m) c[col] += good ? s : 0.f;
      });
}

}  // namespace mixpert
}  // namespace jaxemu
