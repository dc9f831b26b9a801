// jaxemu's own FP32 GEMM: the FP32 candidate of auto's choice on the device
// (docs/auto.md, "The choice on the device"). XLA's FP32 dot (cuBLAS) cannot
// read a gate, so where auto chooses without a conditional, the data that
// only FP32 takes (values beyond 2^+-100: auto's class 2) run this kernel:
// CUDA cores, fused multiply-adds in K order, FP32's special values by
// construction (NaN, Inf and overflow as the arithmetic gives them). It is
// not cuBLAS: the same accuracy class (an FP32 dot product per entry, one
// rounding per K-step), not the same bits, and slower.
#pragma once

#include <cstdint>

namespace jaxemu {
namespace fp32 {

// C (L, M, N) = A (L, M, K) B (L, K, N), every array float32, row-major.
struct Problem {
  const float* a = nullptr;
  const float* b = nullptr;
  float* c = nullptr;
  int64_t batch = 1, m = 0, n = 0, k = 0;
};

// The kernel's tiles: a block of kThreads threads computes a kTileM x kTileN
// block of C, kTileK values of K per stage; each thread a kRegM x kRegN
// grid of entries (rows ty + 16 i, columns tx + 16 j: a warp reads
// shared memory without bank conflicts and stores 64-byte runs of C).
constexpr int kTileM = 128, kTileN = 128, kTileK = 8, kThreads = 256, kRegM = 8, kRegN = 8;

}  // namespace fp32
}  // namespace jaxemu
