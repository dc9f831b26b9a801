// The row statistics kernel (stats/params.h): one pass over A, every
// statistic of a row from the same loads. XLA made of the same reductions
// three to four fusions over A, one of which wrote the one-hot's comparison
// mask (1 GiB at the k-means update's 1024 x 1M) for the others to read
// (docs/performance.md, stop 25).
//
// A row is reduced by kThreads threads (a warp for short rows, a block of 256
// for long ones) in a fixed order: the same operand gives the same bits on
// every run. Values load 16 bytes at a time where the row allows, kUnroll
// loads in flight per thread; a 16-byte vector of zeros is skipped (a
// one-hot row is almost only zeros: the pass then runs at memory speed).
#pragma once

#include <cstdint>

#include "params.h"
#include "values.cuh"

namespace jaxemu {
namespace stats {

// One thread's partial statistics of a row (params.h), in the order of `out`.
template <bool kProbe>
struct RowPartial {
  Extremes e;
  float y = 0.f, z = 0.f;  // sum t, sum |t| (t = a v)
  float m = 0.f, q = 0.f;  // max |t|, sum |t|^(1/8)

  __device__ __forceinline__ void add(float a, float v) {
    a = e.add(a);
    if (kProbe) {
      const float t = a * v, at = fabsf(t);
      y += t;
      z += at;
      m = fmaxf(m, at);
      q += root8(at);
    }
  }

  __device__ __forceinline__ void merge(const RowPartial& o) {
    e.merge(o.e);
    if (kProbe) {
      y += o.y;
      z += o.z;
      m = fmaxf(m, o.m);
      q += o.q;
    }
  }

  // Every field through `shfl` (a warp shuffle of one float).
  template <typename Shfl>
  __device__ __forceinline__ RowPartial shuffled(Shfl shfl) const {
    RowPartial o;
    o.e = e.shuffled(shfl);
    if (kProbe) {
      o.y = shfl(y);
      o.z = shfl(z);
      o.m = shfl(m);
      o.q = shfl(q);
    }
    return o;
  }
  __device__ __forceinline__ RowPartial shfl_down(int d) const {
    return shuffled([d](float x) { return __shfl_down_sync(0xffffffffu, x, d); });
  }
  // The partner lane's partial (lane ^ lane_mask), for butterfly reductions
  // that leave every lane of the group with the row's statistics (Extremes::
  // shfl_xor; the split kernel's, ffi/fused_dispatch.cu).
  __device__ __forceinline__ RowPartial shfl_xor(int lane_mask) const {
    return shuffled([lane_mask](float x) { return __shfl_xor_sync(0xffffffffu, x, lane_mask); });
  }
};

constexpr int kUnroll = 4;

// The kVec values of w at positions i .. i + kVec - 1 of the row; v: the
// probe's values at the same positions (16-byte aligned).
template <typename T, bool kProbe>
__device__ __forceinline__ void add_vector(RowPartial<kProbe>& acc, const Vector<T>& w, const float* v) {
  if (kProbe) {
#pragma unroll
    for (int j = 0; j < kVec<T>; j += 4) {
      const float4 v4 = __ldg(reinterpret_cast<const float4*>(v + j));
      acc.add(to_float(w.x[j]), v4.x);
      acc.add(to_float(w.x[j + 1]), v4.y);
      acc.add(to_float(w.x[j + 2]), v4.z);
      acc.add(to_float(w.x[j + 3]), v4.w);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kVec<T>; ++j) acc.add(to_float(w.x[j]), 0.f);
  }
}

// kThreads threads (4..32: a group of lanes of one warp, or 256: the block)
// reduce row `r`; lane in 0..kThreads-1. Returns the row's statistics in
// lane 0. Every lane of the warp must call it (full-warp shuffles).
template <typename T, int kThreads, bool kProbe>
__device__ __forceinline__ RowPartial<kProbe> reduce_row(const RowStatsProblem& p, int64_t r, int lane) {
  const T* row = static_cast<const T*>(p.a) + r * p.k;
  // The probe of r's batch entry; rows of entry 0 (all of them when batch
  // is 1) skip the division (its 32-bit form: ~20 SASS instructions per row
  // and thread, against ~17 per value; the kernel is issue-bound, H200 ncu,
  // stop 56).
  const int64_t batch_entry = r < p.rows ? 0 : r / p.rows;
  const float* v = kProbe ? p.v + batch_entry * p.k : nullptr;
  RowPartial<kProbe> acc;
  constexpr int kV = kVec<T>;
  const bool vec = (p.k % kV == 0) && (reinterpret_cast<uintptr_t>(p.a) % 16 == 0) &&
                   (!kProbe || reinterpret_cast<uintptr_t>(p.v) % 16 == 0);
  if (vec) {
    const int64_t nv = p.k / kV;
    const uint4* rv = reinterpret_cast<const uint4*>(row);
    for (int64_t i0 = lane; i0 < nv; i0 += int64_t(kThreads) * kUnroll) {
      Vector<T> w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {  // the loads first: kUnroll in flight
        const int64_t i = i0 + int64_t(u) * kThreads;
        w[u].u = i < nv ? __ldg(rv + i) : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (!all_zero(w[u].u)) add_vector<T, kProbe>(acc, w[u], kProbe ? v + (i0 + int64_t(u) * kThreads) * kV : v);
    }
  } else {
    for (int64_t i = lane; i < p.k; i += kThreads) acc.add(to_float(row[i]), kProbe ? v[i] : 0.f);
  }
#pragma unroll
  for (int d = (kThreads < 32 ? kThreads : 32) / 2; d > 0; d /= 2) acc.merge(acc.shfl_down(d));
  if constexpr (kThreads > 32) {
    __shared__ RowPartial<kProbe> warps[kThreads / 32];
    if (lane % 32 == 0) warps[lane / 32] = acc;
    __syncthreads();
    if (lane == 0)
      for (int w = 1; w < kThreads / 32; ++w) acc.merge(warps[w]);
  }
  return acc;
}

template <bool kProbe>
__device__ __forceinline__ void store(const RowStatsProblem& p, int64_t r, const RowPartial<kProbe>& s) {
  const int64_t n = p.batch * p.rows;
  float* o = p.out + r;
  o[0] = s.e.amax;
  o[n] = s.e.amin;
  o[2 * n] = s.e.l1;
  o[3 * n] = s.e.bad;
  if (kProbe) {
    o[4 * n] = s.y;
    o[5 * n] = s.z;
    o[6 * n] = s.m;
    o[7 * n] = s.q;
  }
}

// Short rows: kLanes lanes per row, 256 / kLanes rows per block of 256
// threads. A group past the last row reduces the last row again (every lane
// takes part in the shuffles) and stores nothing.
template <typename T, bool kProbe, int kLanes>
__global__ void __launch_bounds__(256) row_stats_warp_kernel(const RowStatsProblem p) {
  const int64_t n = p.batch * p.rows, r = int64_t(blockIdx.x) * (256 / kLanes) + threadIdx.x / kLanes;
  RowPartial<kProbe> s = reduce_row<T, kLanes, kProbe>(p, r < n ? r : n - 1, threadIdx.x % kLanes);
  if (threadIdx.x % kLanes == 0 && r < n) store<kProbe>(p, r, s);
}

// Long rows: a block of 256 threads per row.
template <typename T, bool kProbe>
__global__ void __launch_bounds__(256) row_stats_block_kernel(const RowStatsProblem p) {
  const int64_t r = blockIdx.x;
  RowPartial<kProbe> s = reduce_row<T, 256, kProbe>(p, r, threadIdx.x);
  if (threadIdx.x == 0) store<kProbe>(p, r, s);
}

}  // namespace stats
}  // namespace jaxemu
