// jaxemu CUDA kernels: host-side interface.
//
// One tensor-core GEMM with *promotion*: D = alpha * (A @ B^T) + beta * C for a
// batch of L problems, where A is (M, K) and B is (N, K), both K-contiguous
// ("TN"), and C, D are (M, N) row-major float32. The tensor cores accumulate
// at most `promote_k` K-steps; then the partial sum is added to a separate
// FP32 accumulator with round-to-nearest adds. Hopper's tensor cores do not
// accumulate in round-to-nearest, so without promotion long sums lose accuracy
// (DESIGN.md 2.1). The epilogue's alpha (a power of two) and beta = 1 let the
// caller add the magnitude levels of a split product smallest first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

namespace jaxemu {

enum class SliceType { kBF16, kFP16, kTF32 };

struct GemmProblem {
  const void* a = nullptr;  // (L, M, K) slice values
  const void* b = nullptr;  // (L, N, K) slice values
  const float* c = nullptr; // (L, M, N), read when beta != 0
  float* d = nullptr;       // (L, M, N)
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t promote_k = 0;    // promotion interval in K-steps; 0: only at the end
  float alpha = 1.0f, beta = 0.0f;
};

// K-steps per mainloop iteration of the kernel for `t`: promote_k must be a
// multiple of it, and K, M, N are padded by the caller (see gemm_requirements).
int64_t gemm_tile_k(SliceType t);

// "" when the problem can run, else why not (alignment, sizes, device).
std::string gemm_check(SliceType t, const GemmProblem& p);

size_t gemm_workspace_bytes(SliceType t, const GemmProblem& p);

// Launches on `stream`; returns "" or an error message. No host synchronisation.
std::string gemm_run(SliceType t, const GemmProblem& p, void* workspace, size_t workspace_bytes,
                     cudaStream_t stream);

// Whether the current device can run these kernels (compute capability 9.0).
bool device_supported(int device, std::string* why);

}  // namespace jaxemu
