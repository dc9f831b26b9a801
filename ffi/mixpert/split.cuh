// The MixPert split (params.h: SplitProblem): one read of a float32 operand,
// one write of its int8 slices in the MixPert kernel's layout, plus each
// K-tile's exponent and fallback flag. XLA's formulation of the same split
// (xla.int8_tile_stats, then cuda_mixpert.pack's stack and transpose) took
// several passes over each operand: ~14 ms of a 19 ms product at the k-means
// update's 1024 x 1M x 256 on an H200 (docs/performance.md, stop 45).
//
// The arithmetic is xla.split_int8's, value for value: a tile of 32 shares
// E = floor(log2 max |x|) + 1 (0 for a zero tile); y = x 2^(6 - E) lies in
// (-64, 64); slice i is q_i = rint(y_i) (round half to even), y_{i+1} =
// (y_i - q_i) 128, every step exact in FP32. The exponents are read from the
// bits (subnormals included), as xla.exponent does. x 2^(6 - E) is taken in
// two power-of-two steps of one sign, so it is exact wherever the result is
// a normal float; where it is not (|y| < 2^-126) every slice is zero either
// way, since slices resolve 2^-14.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "../common/bits.cuh"
#include "../fused/split.cuh"  // fused::pow2f
#include "params.h"

namespace jaxemu {
namespace mixpert {

constexpr int kSplitThreads = 256;
constexpr uint32_t kNoNonzero = 0xFFFFFFFFu;  // the minimum of a tile with no nonzero value

// floor(log2(v)) of a finite nonnegative float from its bits, subnormals
// exact; -151 for zero (xla.exponent).
__device__ __forceinline__ int floor_log2(uint32_t u) {
  const int e = int(u >> 23);
  if (e > 0) return e - 127;
  const uint32_t m = u & 0x7FFFFFu;
  return m ? -149 + (31 - __clz(int(m))) : -151;
}

// What a tile's maximum and smallest nonzero |value| (as bits) decide.
struct TileSplit {
  int e;         // E
  bool ok;       // the spread fits max_spread
  float f1, f2;  // 2^(6 - E) as two factors of one sign

  __device__ __forceinline__ TileSplit(uint32_t amax, uint32_t amin, int max_spread) {
    const int emax = floor_log2(amax);
    e = amax ? emax + 1 : 0;
    ok = amax == 0 || emax - floor_log2(amin == kNoNonzero ? amax : amin) <= max_spread;
    const int t = 6 - e, t1 = t / 2;  // t in [-123, 154] (-123: NaN/Inf, E = 129): both halves within float's range
    f1 = fused::pow2f(t1);
    f2 = fused::pow2f(t - t1);
  }

  // The S slices of x (slice i at bits 8 i of the result's byte i: one int8 each).
  template <int S>
  __device__ __forceinline__ void cut(float x, int8_t (&q)[S]) const {
    float y = x * f1 * f2;
#pragma unroll
    for (int i = 0; i < S; ++i) {
      const float r = rintf(y);
      q[i] = int8_t(int(r));
      y = (y - r) * 128.f;
    }
  }
};

__device__ __forceinline__ uint32_t pack4(int8_t a, int8_t b, int8_t c, int8_t d) {
  return uint32_t(uint8_t(a)) | uint32_t(uint8_t(b)) << 8 | uint32_t(uint8_t(c)) << 16 | uint32_t(uint8_t(d)) << 24;
}

// A (L, R, K): one warp per 128 K-steps of a row (four tiles of 32, 8 lanes
// each, 4 values per lane from one 16-byte load), kChunks such chunks per
// warp with all their loads issued first. The warp writes each slice's 128
// bytes of the chunk contiguously.
template <int S, int kChunks>
__global__ void __launch_bounds__(kSplitThreads) split_rows_kernel(SplitProblem p) {
  const int lane = threadIdx.x % 32;
  const int64_t chunks = p.k / kTileK, groups = (chunks + kChunks - 1) / kChunks;
  const int64_t warp = (int64_t(blockIdx.x) * kSplitThreads + threadIdx.x) / 32;
  if (warp >= p.batch * p.rows * groups) return;
  const int64_t row = warp / groups, j0 = (warp % groups) * kChunks;
  const float* x = p.x + row * p.k + j0 * kTileK + 4 * lane;
  float4 v[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c)
    if (j0 + c < chunks) v[c] = __ldcs(reinterpret_cast<const float4*>(x + c * kTileK));
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t j = j0 + c;
    if (j >= chunks) break;
    const float xs[4] = {v[c].x, v[c].y, v[c].z, v[c].w};
    uint32_t amax = 0, amin = kNoNonzero;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t u = bits_of(xs[i]) & 0x7FFFFFFFu;
      amax = max(amax, u);
      if (u) amin = min(amin, u);
    }
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) {  // the 8 lanes of a tile
      amax = max(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
      amin = min(amin, __shfl_xor_sync(0xFFFFFFFFu, amin, o));
    }
    const TileSplit ts(amax, amin, p.max_spread);
    int8_t q[4][S];
#pragma unroll
    for (int i = 0; i < 4; ++i) ts.cut<S>(xs[i], q[i]);
    uint32_t* out = reinterpret_cast<uint32_t*>(p.slices + (row * chunks + j) * S * kTileK) + lane;
#pragma unroll
    for (int s = 0; s < S; ++s) out[s * (kTileK / 4)] = pack4(q[0][s], q[1][s], q[2][s], q[3][s]);
    if (lane % 8 == 0) {
      const int64_t t = row * (chunks * (kTileK / kScaleTile)) + j * (kTileK / kScaleTile) + lane / 8;
      p.exps[t] = ts.e;
      p.ok[t] = ts.ok;
    }
  }
}

// B (L, K, R), tiles down the columns: a block stages 128 K-steps of 64
// columns in shared memory (coalesced row reads), then each thread splits
// one column's tile of 32 (a warp: 32 neighbouring columns, conflict-free)
// and writes that tile's 32 bytes per slice (B's slices are stored
// transposed, K contiguous).
constexpr int kColTile = 64;

template <int S>
__global__ void __launch_bounds__(kSplitThreads) split_columns_kernel(SplitProblem p) {
  __shared__ float tile[kTileK][kColTile];
  const int64_t chunks = p.k / kTileK, col_blocks = (p.rows + kColTile - 1) / kColTile;
  const int64_t blk = blockIdx.x;
  const int64_t cb = blk % col_blocks, j = (blk / col_blocks) % chunks, l = blk / (col_blocks * chunks);
  const int64_t n0 = cb * kColTile;
  const float* x = p.x + (l * p.k + j * kTileK) * p.rows;
#pragma unroll 8
  for (int i = threadIdx.x; i < kTileK * kColTile; i += kSplitThreads) {
    const int r = i / kColTile, c = i % kColTile;
    tile[r][c] = n0 + c < p.rows ? __ldcs(x + r * p.rows + n0 + c) : 0.f;
  }
  __syncthreads();
  const int c = threadIdx.x % kColTile, t = threadIdx.x / kColTile;  // column, tile of 32 in the chunk
  const int64_t n = n0 + c;
  if (n >= p.rows) return;
  uint32_t amax = 0, amin = kNoNonzero;
#pragma unroll 8
  for (int kk = 0; kk < kScaleTile; ++kk) {
    const uint32_t u = bits_of(tile[t * kScaleTile + kk][c]) & 0x7FFFFFFFu;
    amax = max(amax, u);
    if (u) amin = min(amin, u);
  }
  const TileSplit ts(amax, amin, p.max_spread);
  uint32_t w[S][kScaleTile / 4];
#pragma unroll
  for (int g = 0; g < kScaleTile / 4; ++g) {
    int8_t q[4][S];
#pragma unroll
    for (int i = 0; i < 4; ++i) ts.cut<S>(tile[t * kScaleTile + 4 * g + i][c], q[i]);
#pragma unroll
    for (int s = 0; s < S; ++s) w[s][g] = pack4(q[0][s], q[1][s], q[2][s], q[3][s]);
  }
  int8_t* out = p.slices + ((l * p.rows + n) * chunks + j) * S * kTileK + t * kScaleTile;
#pragma unroll
  for (int s = 0; s < S; ++s) {
    uint4* o = reinterpret_cast<uint4*>(out + s * kTileK);
    o[0] = make_uint4(w[s][0], w[s][1], w[s][2], w[s][3]);
    o[1] = make_uint4(w[s][4], w[s][5], w[s][6], w[s][7]);
  }
  const int64_t e = (l * chunks * (kTileK / kScaleTile) + j * (kTileK / kScaleTile) + t) * p.rows + n;
  p.exps[e] = ts.e;
  p.ok[e] = ts.ok;
}

}  // namespace mixpert
}  // namespace jaxemu
