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
// The tile's loads are cp.async, which fills what lies past k or rows with
// zeros; with kStages = 2 the block loads its next tile into a second tile
// of shared memory while its threads work on this one (twice the shared
// memory: 33.8 KB of float, so float only fits within the 48 KB of static
// shared memory).
constexpr int kTileK = 128, kTileR = 32, kTileThreads = 256;

// cp.async of one 4- or 8-byte value into shared memory, or zeros there when
// !valid (src-size 0: nothing is read), and its group fences (sm_80+).
template <class T>
__device__ __forceinline__ void copy_async_or_zero(T* dst, const T* src, bool valid) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "4- or 8-byte values");
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src), "n"(int(sizeof(T))),
               "r"(valid ? int(sizeof(T)) : 0));
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void copy_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

template <int kStages = 1, class T, class Task>
__device__ __forceinline__ void for_each_transposed_tile(const T* x, int64_t batch, int64_t k, int64_t rows,
                                                         int64_t k_out, int64_t rows_out, Task&& task) {
  static_assert(kStages == 1 || kStages == 2, "one or two tiles in shared memory");
  __shared__ T tile[kStages][kTileK][kTileR + 1];
  const int64_t ktiles = (k_out + kTileK - 1) / kTileK, rtiles = (rows_out + kTileR - 1) / kTileR;
  const int64_t total = batch * rtiles * ktiles;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int rr = lane / 2 + kTileR / 2 * (warp & 1), group = (lane & 1) + 2 * (warp >> 1);  // group of 16 k: 0..7
  auto where = [&](int64_t t, int64_t* b, int64_t* k0, int64_t* r0) {
    int64_t rest, kt, rt;
    divmod(t, ktiles, &rest, &kt);
    divmod(rest, rtiles, b, &rt);
    *k0 = kt * kTileK, *r0 = rt * kTileR;
  };
  auto load = [&](int64_t t, int s) {  // tile t into stage s (nothing past the last tile)
    if (t < total) {
      int64_t b, k0, r0;
      where(t, &b, &k0, &r0);
      const T* src = x + b * k * rows;
#pragma unroll
      for (int i = 0; i < kTileK * kTileR / kTileThreads; ++i) {
        const int idx = int(threadIdx.x) + i * kTileThreads, kk = idx / kTileR, c = idx % kTileR;
        const int64_t kg = k0 + kk, rg = r0 + c;
        const bool in = kg < k && rg < rows;
        copy_async_or_zero(&tile[s][kk][c], in ? src + kg * rows + rg : x, in);
      }
    }
    copy_async_commit();  // an empty group past the end: the waits below count groups
  };
  int s = 0;
  load(blockIdx.x, 0);
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    if constexpr (kStages == 2) {
      load(t + gridDim.x, s ^ 1);  // the other stage: free since the barrier that ended the last step
      copy_async_wait<1>();        // this thread's loads of tile t have landed
    } else {
      copy_async_wait<0>();
    }
    __syncthreads();  // everyone's loads of tile t have landed
    int64_t b, k0, r0;
    where(t, &b, &k0, &r0);
    const int64_t r = r0 + rr, kq = k0 + 16 * group;
    if (r < rows_out && kq < k_out) task(b, r, kq, &tile[s][16 * group][rr], int64_t(kTileR + 1));
    __syncthreads();  // stage s is read: the next step may load into it
    if constexpr (kStages == 2) s ^= 1;
    else if (t + gridDim.x < total) load(t + gridDim.x, 0);
  }
}

// The number of blocks for a grid-stride launch of for_each_transposed_tile.
inline int64_t transposed_tiles(int64_t batch, int64_t k_out, int64_t rows_out) {
  return batch * ((rows_out + kTileR - 1) / kTileR) * ((k_out + kTileK - 1) / kTileK);
}

}  // namespace jaxemu
