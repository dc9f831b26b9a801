// jaxemu's FP32 GEMM: checks and launch (fp32/kernel.cuh).
#include <string>

#include "fp32.h"
#include "fp32/kernel.cuh"

namespace jaxemu {
namespace fp32 {

std::string check(const Problem& p) {
  if (p.batch < 0 || p.m < 0 || p.n < 0 || p.k < 0) return "negative size";
  if (p.batch * p.m * p.n > 0 && (!p.c || (p.k > 0 && (!p.a || !p.b)))) return "missing operand";
  if (p.batch > 65535 || (p.m + kTileM - 1) / kTileM > 65535 || (p.n + kTileN - 1) / kTileN > (int64_t(1) << 31) - 1)
    return "too large for one launch's grid (batch and M / " + std::to_string(kTileM) + " at most 65535)";
  return "";
}

std::string run(const Problem& p, cudaStream_t stream, Gate gate) {
  std::string why = check(p);
  if (!why.empty()) return why;
  if (p.batch * p.m * p.n == 0) return "";
  const dim3 grid(unsigned((p.n + kTileN - 1) / kTileN), unsigned((p.m + kTileM - 1) / kTileM), unsigned(p.batch));
  gemm_kernel<<<grid, kThreads, 0, stream>>>(p, gate);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("fp32 gemm launch: ") + cudaGetErrorString(e);
}

}  // namespace fp32
}  // namespace jaxemu
