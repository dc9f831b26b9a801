// The column statistics kernels (stats/params.h): max |b|, min nonzero |b|,
// sum |b| and any NaN/Inf of each column of B (batch, k, cols), cols contiguous, without
// transposing it. A block reads a 64-thread-wide strip of columns (16 bytes
// per thread and row where the rows allow: 256 float32 columns) over one
// chunk of k, four row groups of 64 threads side by side, kUnroll rows in
// flight per thread; the chunks' partial statistics are then reduced in chunk
// order by a second launch (the same bits on every run: no atomics).
#pragma once

#include <cstdint>

#include "params.h"
#include "values.cuh"

namespace jaxemu {
namespace stats {

constexpr int kColThreads = 64, kRowGroups = 4, kColUnroll = 4;
constexpr int kColStats = 4;  // amax, amin, l1, bad: the rows of partial and out

// One column's statistics into o[0], o[n], o[2n], o[3n].
__device__ __forceinline__ void store(float* o, int64_t n, const Extremes& e) {
  o[0] = e.amax;
  o[n] = e.amin;
  o[2 * n] = e.l1;
  o[3 * n] = e.bad;
}

// V consecutive values of one row loaded at once: V = kVec<T> (16 bytes) or 1.
template <typename T, int V>
__device__ __forceinline__ void load_values(const T* src, float (&x)[V]) {
  if constexpr (V == 1) {
    x[0] = to_float(src[0]);
  } else {
    Vector<T> w;
    w.u = __ldg(reinterpret_cast<const uint4*>(src));
#pragma unroll
    for (int j = 0; j < V; ++j) x[j] = to_float(w.x[j]);
  }
}

// Grid (column strips, chunks, batch), kColThreads * kRowGroups threads.
template <typename T, int V>
__global__ void __launch_bounds__(kColThreads* kRowGroups) col_partial_kernel(const ColStatsProblem p) {
  const int tx = threadIdx.x % kColThreads, group = threadIdx.x / kColThreads;
  const int64_t c0 = (int64_t(blockIdx.x) * kColThreads + tx) * V;
  const int64_t s = blockIdx.y, b = blockIdx.z;
  const int64_t per = (p.k + p.chunks - 1) / p.chunks;
  const int64_t k0 = s * per, k1 = k0 + per < p.k ? k0 + per : p.k;
  const T* col = static_cast<const T*>(p.b) + b * p.k * p.cols + c0;
  Extremes acc[V];
  if (c0 < p.cols) {
    for (int64_t r0 = k0 + group; r0 < k1; r0 += int64_t(kRowGroups) * kColUnroll) {
      float x[kColUnroll][V];
#pragma unroll
      for (int u = 0; u < kColUnroll; ++u) {  // the loads first: kColUnroll in flight
        const int64_t r = r0 + int64_t(u) * kRowGroups;
        if (r < k1) {
          load_values<T, V>(col + r * p.cols, x[u]);
        } else {
#pragma unroll
          for (int j = 0; j < V; ++j) x[u][j] = 0.f;
        }
      }
#pragma unroll
      for (int u = 0; u < kColUnroll; ++u)
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j].add(x[u][j]);
    }
  }
  // The row groups' statistics, merged in group order.
  __shared__ Extremes part[kRowGroups - 1][kColThreads][V];
  if (group > 0)
#pragma unroll
    for (int j = 0; j < V; ++j) part[group - 1][tx][j] = acc[j];
  __syncthreads();
  if (group > 0 || c0 >= p.cols) return;
  const int64_t n = p.batch * p.cols;
  float* o = p.partial + s * kColStats * n + b * p.cols + c0;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    for (int g = 0; g < kRowGroups - 1; ++g) acc[j].merge(part[g][tx][j]);
    store(o + j, n, acc[j]);
  }
}

// The chunks' statistics per (batch, column): a block of kReduceCols
// columns x kReduceSlices slices of the chunks; slice t merges chunks t,
// t + kReduceSlices, ... (kColUnroll loads in flight), then the slices merge
// in slice order: a fixed order, the same bits on every run. (One thread
// per column walking every chunk took 0.11 ms for the k-means update's 256
// columns of 1024 chunks, a latency-bound chain per thread; 8 slices, 0.04.)
constexpr int kReduceCols = 32, kReduceSlices = 32;

__global__ void __launch_bounds__(kReduceCols* kReduceSlices) col_reduce_kernel(const ColStatsProblem p) {
  const int tx = threadIdx.x % kReduceCols, slice = threadIdx.x / kReduceCols;
  const int64_t n = p.batch * p.cols, i = int64_t(blockIdx.x) * kReduceCols + tx;
  Extremes acc;
  if (i < n) {
    for (int64_t s0 = slice; s0 < p.chunks; s0 += int64_t(kReduceSlices) * kColUnroll) {
      Extremes o[kColUnroll];
#pragma unroll
      for (int u = 0; u < kColUnroll; ++u) {
        const int64_t s = s0 + int64_t(u) * kReduceSlices;
        if (s < p.chunks) {
          const float* part = p.partial + s * kColStats * n + i;
          o[u].amax = part[0];
          o[u].amin = part[n];
          o[u].l1 = part[2 * n];
          o[u].bad = part[3 * n];
        }
      }
#pragma unroll
      for (int u = 0; u < kColUnroll; ++u) acc.merge(o[u]);  // (a default Extremes merges as nothing)
    }
  }
  __shared__ Extremes part[kReduceSlices - 1][kReduceCols];
  if (slice > 0) part[slice - 1][tx] = acc;
  __syncthreads();
  if (slice > 0 || i >= n) return;
  for (int t = 0; t < kReduceSlices - 1; ++t) acc.merge(part[t][tx]);
  store(p.out + i, n, acc);
}

}  // namespace stats
}  // namespace jaxemu
