// The column statistics kernels (stats/params.h): max |b|, min nonzero |b|
// and sum |b| of each column of B (batch, k, cols), cols contiguous, without
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
        for (int j = 0; j < V; ++j) acc[j].add(fabsf(finite_or_zero(x[u][j])));
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
  float* o = p.partial + s * 3 * n + b * p.cols + c0;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    for (int g = 0; g < kRowGroups - 1; ++g) acc[j].merge(part[g][tx][j]);
    o[j] = acc[j].amax;
    o[n + j] = acc[j].amin;
    o[2 * n + j] = acc[j].l1;
  }
}

// One thread per (batch, column): the chunks' statistics in chunk order.
__global__ void __launch_bounds__(256) col_reduce_kernel(const ColStatsProblem p) {
  const int64_t n = p.batch * p.cols, i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Extremes acc;
  for (int64_t s = 0; s < p.chunks; ++s) {
    const float* part = p.partial + s * 3 * n + i;
    Extremes o;
    o.amax = part[0];
    o.amin = part[n];
    o.l1 = part[2 * n];
    acc.merge(o);
  }
  p.out[i] = acc.amax;
  p.out[n + i] = acc.amin;
  p.out[2 * n + i] = acc.l1;
}

}  // namespace stats
}  // namespace jaxemu
