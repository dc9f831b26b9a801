// The row statistics kernel (stats/params.h): one pass over A, every
// statistic of a row from the same loads. XLA made of the same reductions
// three to four fusions over A, one of which wrote the one-hot's comparison
// mask (1 GiB at the k-means update's 1024 x 1M) for the others to read
// (docs/performance.md, stop 25).
//
// A row is reduced by kThreads threads (a warp for short rows, a block of 256
// for long ones) in a fixed order: the same operand gives the same bits on
// every run. Values load 16 bytes at a time where the row allows.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "params.h"

namespace jaxemu {
namespace stats {

template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ float to_float<__half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

// One thread's partial statistics (params.h), in the order of `out`.
template <bool kProbe>
struct Partial {
  float amax = 0.f, amin = INFINITY, l1 = 0.f;
  float y = 0.f, z = 0.f, m = 0.f, q = 0.f;

  __device__ __forceinline__ void add(float a, float v) {
    a = isfinite(a) ? a : 0.f;
    const float x = fabsf(a);
    amax = fmaxf(amax, x);
    if (x > 0.f) amin = fminf(amin, x);
    l1 += x;
    if (kProbe) {
      const float t = a * v, at = fabsf(t);
      y += t;
      z += at;
      m = fmaxf(m, at);
      q += sqrtf(sqrtf(sqrtf(at)));
    }
  }

  __device__ __forceinline__ void merge(const Partial& o) {
    amax = fmaxf(amax, o.amax);
    amin = fminf(amin, o.amin);
    l1 += o.l1;
    if (kProbe) {
      y += o.y;
      z += o.z;
      m = fmaxf(m, o.m);
      q += o.q;
    }
  }

  __device__ __forceinline__ Partial shfl_down(int d) const {
    Partial o;
    o.amax = __shfl_down_sync(0xffffffffu, amax, d);
    o.amin = __shfl_down_sync(0xffffffffu, amin, d);
    o.l1 = __shfl_down_sync(0xffffffffu, l1, d);
    if (kProbe) {
      o.y = __shfl_down_sync(0xffffffffu, y, d);
      o.z = __shfl_down_sync(0xffffffffu, z, d);
      o.m = __shfl_down_sync(0xffffffffu, m, d);
      o.q = __shfl_down_sync(0xffffffffu, q, d);
    }
    return o;
  }
};

// Values per 16-byte load.
template <typename T>
constexpr int kVec = 16 / int(sizeof(T));

template <typename T, bool kProbe>
__device__ __forceinline__ void add_vector(Partial<kProbe>& acc, const T* row, const float* v, int64_t i) {
  union {
    uint4 u;
    T x[kVec<T>];
  } w;
  w.u = *reinterpret_cast<const uint4*>(row + i);
#pragma unroll
  for (int j = 0; j < kVec<T>; ++j) acc.add(to_float(w.x[j]), kProbe ? v[i + j] : 0.f);
}

// kThreads threads (32: a warp, or 256: the block) reduce row `r`; lane in
// 0..kThreads-1. Returns the row's statistics in lane 0.
template <typename T, int kThreads, bool kProbe>
__device__ __forceinline__ Partial<kProbe> reduce_row(const RowStatsProblem& p, int64_t r, int lane) {
  const T* row = static_cast<const T*>(p.a) + r * p.k;
  const float* v = kProbe ? p.v + (r / p.rows) * p.k : nullptr;
  Partial<kProbe> acc;
  constexpr int kV = kVec<T>;
  const bool vec = (p.k % kV == 0) && (reinterpret_cast<uintptr_t>(p.a) % 16 == 0);
  if (vec) {
    for (int64_t i = int64_t(lane) * kV; i < p.k; i += int64_t(kThreads) * kV) add_vector<T, kProbe>(acc, row, v, i);
  } else {
    for (int64_t i = lane; i < p.k; i += kThreads) acc.add(to_float(row[i]), kProbe ? v[i] : 0.f);
  }
#pragma unroll
  for (int d = 16; d > 0; d /= 2) acc.merge(acc.shfl_down(d));
  if (kThreads > 32) {
    __shared__ Partial<kProbe> warps[kThreads / 32];
    if (lane % 32 == 0) warps[lane / 32] = acc;
    __syncthreads();
    if (lane == 0)
      for (int w = 1; w < kThreads / 32; ++w) acc.merge(warps[w]);
  }
  return acc;
}

template <bool kProbe>
__device__ __forceinline__ void store(const RowStatsProblem& p, int64_t r, const Partial<kProbe>& s) {
  const int64_t n = p.batch * p.rows;
  float* o = p.out + r;
  o[0] = s.amax;
  o[n] = s.amin;
  o[2 * n] = s.l1;
  if (kProbe) {
    o[3 * n] = s.y;
    o[4 * n] = s.z;
    o[5 * n] = s.m;
    o[6 * n] = s.q;
  }
}

// Short rows: a warp per row, 8 rows per block of 256 threads.
template <typename T, bool kProbe>
__global__ void __launch_bounds__(256) row_stats_warp_kernel(const RowStatsProblem p) {
  const int64_t r = int64_t(blockIdx.x) * 8 + threadIdx.x / 32;
  if (r >= p.batch * p.rows) return;  // whole warps leave together
  Partial<kProbe> s = reduce_row<T, 32, kProbe>(p, r, threadIdx.x % 32);
  if (threadIdx.x % 32 == 0) store<kProbe>(p, r, s);
}

// Long rows: a block of 256 threads per row.
template <typename T, bool kProbe>
__global__ void __launch_bounds__(256) row_stats_block_kernel(const RowStatsProblem p) {
  const int64_t r = blockIdx.x;
  Partial<kProbe> s = reduce_row<T, 256, kProbe>(p, r, threadIdx.x);
  if (threadIdx.x == 0) store<kProbe>(p, r, s);
}

}  // namespace stats
}  // namespace jaxemu
