// Work distribution shared by the operand-preparation kernels (the fused
// path's split, ffi/fused/split.cuh; Ozaki II's residues,
// ffi/int8/residues.cuh): both read an operand once and write it, K
// contiguous, in the layout their GEMM's TMA loads expect.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace jaxemu {

// a / b and a % b for nonnegative a, b; 32-bit divisions where they fit (a
// 64-bit division by a run-time value costs several times more).
__host__ __device__ __forceinline__ void divmod(int64_t a, int64_t b, int64_t* q, int64_t* r) {
  if (a <= int64_t(UINT32_MAX) && b <= int64_t(UINT32_MAX)) {
    const uint32_t qq = uint32_t(a) / uint32_t(b);
    *q = qq;
    *r = int64_t(uint32_t(a) - qq * uint32_t(b));
  } else {
    *q = a / b;
    *r = a - *q * b;
  }
}

// A transposed operand x (batch, k, rows), rows contiguous (B of A B, whose
// columns are the GEMM's rows), read through a kTileK x kTileR tile of shared
// memory: the block reads it with coalesced loads along rows (a warp reads 32
// consecutive values of one k), then each thread takes 16 consecutive k of
// one row: task(b, r, k0, col, stride) with col[j * stride] = x[b, k0 + j, r]
// for j < 16 (zero past k or rows). The tile is padded by one column, so a
// warp's column reads (rows lane / 2, k groups lane % 2) hit 32 distinct
// banks, and the two lanes of a pair own adjacent 16-value pieces of a row:
// their stores fill whole 32-byte sectors. Tasks cover rows < rows_out and
// k < k_out (k_out a multiple of 16), padding included. Launch with
// kTileThreads threads per block and any grid (grid-stride over tiles).
constexpr int kTileK = 128, kTileR = 32, kTileThreads = 256;

template <class T, class Task>
__device__ __forceinline__ void for_each_transposed_tile(const T* x, int64_t batch, int64_t k, int64_t rows,
                                                         int64_t k_out, int64_t rows_out, Task&& task) {
  __shared__ T tile[kTileK][kTileR + 1];
  const int64_t ktiles = (k_out + kTileK - 1) / kTileK, rtiles = (rows_out + kTileR - 1) / kTileR;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int rr = lane / 2 + kTileR / 2 * (warp & 1), group = (lane & 1) + 2 * (warp >> 1);  // group of 16 k: 0..7
  for (int64_t t = blockIdx.x; t < batch * rtiles * ktiles; t += gridDim.x) {
    int64_t rest, kt, b, rt;
    divmod(t, ktiles, &rest, &kt);
    divmod(rest, rtiles, &b, &rt);
    const int64_t k0 = kt * kTileK, r0 = rt * kTileR;
    const T* src = x + b * k * rows;
#pragma unroll
    for (int i = 0; i < kTileK * kTileR / kTileThreads; ++i) {
      const int idx = int(threadIdx.x) + i * kTileThreads, kk = idx / kTileR, c = idx % kTileR;
      const int64_t kg = k0 + kk, rg = r0 + c;
      tile[kk][c] = (kg < k && rg < rows) ? src[kg * rows + rg] : T(0);
    }
    __syncthreads();
    const int64_t r = r0 + rr, kq = k0 + 16 * group;
    if (r < rows_out && kq < k_out) task(b, r, kq, &tile[16 * group][rr], int64_t(kTileR + 1));
    __syncthreads();
  }
}

// The number of blocks for a grid-stride launch of for_each_transposed_tile.
inline int64_t transposed_tiles(int64_t batch, int64_t k_out, int64_t rows_out) {
  return batch * ((rows_out + kTileR - 1) / kTileR) * ((k_out + kTileK - 1) / kTileK);
}

}  // namespace jaxemu
