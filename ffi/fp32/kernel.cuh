// jaxemu's FP32 GEMM (params.h): shared-memory tiles of A and B, double
// buffered (the next stage's loads are in flight while the block multiplies
// this one), an 8 x 8 register grid per thread, fmaf in K order.
#pragma once

#include "../common/gate.h"
#include "params.h"

namespace jaxemu {
namespace fp32 {

static_assert(kTileM * kTileK == 4 * kThreads && kTileN * kTileK == 4 * kThreads, "4 values of A and of B per thread");
static_assert(kRegM * 16 == kTileM && kRegN * 16 == kTileN && kThreads == 256, "16 x 16 threads of 8 x 8 entries");

// The stage of K-tile k0 into registers: A's kTileM x kTileK values (thread
// t: row t % 128, K-steps 4 (t / 128) .. + 3) and B's kTileK x kTileN
// (K-step t / 32, columns 4 (t % 32) .. + 3), zeros outside the operand.
__device__ __forceinline__ void load_stage(const Problem& p, const float* a, const float* b, int64_t row0,
                                           int64_t col0, int64_t k0, float (&ra)[4], float (&rb)[4]) {
  const int t = threadIdx.x;
  const int64_t r = row0 + t % kTileM, ka = k0 + 4 * (t / kTileM);
#pragma unroll
  for (int i = 0; i < 4; ++i) ra[i] = r < p.m && ka + i < p.k ? a[r * p.k + ka + i] : 0.f;
  const int64_t kb = k0 + t / 32, c = col0 + 4 * (t % 32);
#pragma unroll
  for (int j = 0; j < 4; ++j) rb[j] = kb < p.k && c + j < p.n ? b[kb * p.n + c + j] : 0.f;
}

__device__ __forceinline__ void store_stage(float (*as)[kTileM], float (*bs)[kTileN], const float (&ra)[4],
                                            const float (&rb)[4]) {
  const int t = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 4; ++i) as[4 * (t / kTileM) + i][t % kTileM] = ra[i];
#pragma unroll
  for (int j = 0; j < 4; ++j) bs[t / 32][4 * (t % 32) + j] = rb[j];
}

// One block per output tile (grid: tiles of N, tiles of M, batch); gate
// (common/gate.h) closed: it returns before reading or writing anything.
__global__ void __launch_bounds__(kThreads) gemm_kernel(const Problem p, const Gate gate) {
  if (gate_closed(gate)) return;
  __shared__ float as[2][kTileK][kTileM];
  __shared__ float bs[2][kTileK][kTileN];
  const int64_t l = blockIdx.z, row0 = int64_t(blockIdx.y) * kTileM, col0 = int64_t(blockIdx.x) * kTileN;
  const float* a = p.a + l * p.m * p.k;
  const float* b = p.b + l * p.k * p.n;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[kRegM][kRegN] = {};
  float ra[4], rb[4];
  load_stage(p, a, b, row0, col0, 0, ra, rb);
  store_stage(as[0], bs[0], ra, rb);
  __syncthreads();
  const int64_t stages = (p.k + kTileK - 1) / kTileK;
  for (int64_t s = 0; s < stages; ++s) {
    const int cur = int(s & 1);
    if (s + 1 < stages) load_stage(p, a, b, row0, col0, (s + 1) * kTileK, ra, rb);
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float x[kRegM], y[kRegN];
#pragma unroll
      for (int i = 0; i < kRegM; ++i) x[i] = as[cur][kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < kRegN; ++j) y[j] = bs[cur][kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < kRegM; ++i)
#pragma unroll
        for (int j = 0; j < kRegN; ++j) acc[i][j] = fmaf(x[i], y[j], acc[i][j]);
    }
    // The other buffer was last read in stage s - 1, before this stage's
    // barrier: it can take stage s + 1 now; one barrier per stage.
    if (s + 1 < stages) store_stage(as[cur ^ 1], bs[cur ^ 1], ra, rb);
    __syncthreads();
  }
  float* c = p.c + l * p.m * p.n;
#pragma unroll
  for (int i = 0; i < kRegM; ++i) {
    const int64_t r = row0 + ty + 16 * i;
    if (r >= p.m) continue;
#pragma unroll
    for (int j = 0; j < kRegN; ++j) {
      const int64_t col = col0 + tx + 16 * j;
      if (col < p.n) c[r * p.n + col] = acc[i][j];
    }
  }
}

}  // namespace fp32
}  // namespace jaxemu
