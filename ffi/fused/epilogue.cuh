// Epilogue of the fused GEMM: FP32 accumulators straight from registers to
// global memory (no shared memory, no second pass over C). Applies the exact
// power-of-two unscaling of fp16 row/column scaling, and raises the
// `nonfinite` flag when any output is NaN/Inf: with finite slices that means
// an overflow, which the caller resolves with FP32's own value.
#pragma once

#include <cstdint>

#include "cute/tensor.hpp"

#include "mainloop.cuh"
#include "scheduler.cuh"
#include "traits.cuh"

namespace jaxemu {
namespace fused {

template <class T>
struct Epilogue {
  static constexpr int TM = T::kTileM, TN = T::kTileN;

  template <class Accum, class Coords>
  static __device__ void store(typename T::Params const& params, WorkTile const& w, Accum& total,
                               Coords const& coords /* (row, col) in the tile per accumulator */) {
    const Problem& p = params.problem;
    const int64_t M = p.m, N = p.n;
    float* __restrict__ out = p.c + (int64_t(w.split) * p.batch + w.l) * M * N;
    const int64_t row0 = int64_t(w.m_blk) * TM, col0 = int64_t(w.n_blk) * TN;
    // First every load (the exponents), then every store: a load after a
    // store through another pointer would wait for it (possible aliasing).
    if (p.row_exp != nullptr) {
      const int32_t* __restrict__ row_exp = p.row_exp + int64_t(w.l) * M;
      const int32_t* __restrict__ col_exp = p.col_exp + int64_t(w.l) * N;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(total); ++i) {
        const int64_t r = row0 + get<0>(coords(i)), c = col0 + get<1>(coords(i));
        const int e = (r < M ? __ldg(row_exp + r) : 0) + (c < N ? __ldg(col_exp + c) : 0);
        total(i) = scale_pow2(total(i), -e);
      }
    }
    bool bad = false;
    const bool pairs = (N % 2) == 0;  // (col, col + 1) pairs are 8-byte aligned
    // The wgmma accumulator layout holds (row, col) and (row, col + 1) in
    // consecutive registers, col even.
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(total); i += 2) {
      const int64_t r = row0 + get<0>(coords(i)), c = col0 + get<1>(coords(i));
      if (r >= M || c >= N) continue;
      const float v0 = total(i), v1 = total(i + 1);
      float* dst = out + r * N + c;
      bad |= !isfinite(v0);
      if (c + 1 < N) {
        bad |= !isfinite(v1);
        if (pairs) {
          *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
        } else {
          dst[0] = v0;
          dst[1] = v1;
        }
      } else {
        dst[0] = v0;
      }
    }
    if (__any_sync(0xffffffffu, bad) && (threadIdx.x % 32) == 0) atomicOr(p.nonfinite, 1);
  }
};

}  // namespace fused
}  // namespace jaxemu
