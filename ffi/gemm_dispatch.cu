// Checks and dispatch by slice type for the promoted GEMM (see gemm.h).
#include <cstdint>
#include <string>

#include "gemm.h"

namespace jaxemu {
namespace sm90 {
#define JAXEMU_DECLARE(n)                                                   \
  std::string run_##n(const GemmProblem&, void*, cudaStream_t);             \
  std::string check_##n(const GemmProblem&);                                \
  size_t workspace_##n(const GemmProblem&);
JAXEMU_DECLARE(bf16)
JAXEMU_DECLARE(fp16)
JAXEMU_DECLARE(tf32)
#undef JAXEMU_DECLARE
}  // namespace sm90

int64_t gemm_tile_k(SliceType t) { return t == SliceType::kTF32 ? 32 : 64; }

static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

std::string gemm_check(SliceType t, const GemmProblem& p) {
  const int64_t tk = gemm_tile_k(t);
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.batch < 1) return "empty problem (the caller handles zero-sized dims)";
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX || p.batch > INT32_MAX) return "dimension too large";
  if (p.k % tk) return "K = " + std::to_string(p.k) + " is not a multiple of the tile K " + std::to_string(tk);
  if (p.n % 4) return "N = " + std::to_string(p.n) + " is not a multiple of 4 (16-byte rows of C)";
  if (p.promote_k < 0 || p.promote_k % tk)
    return "promote_k = " + std::to_string(p.promote_k) + " is not a non-negative multiple of " + std::to_string(tk);
  if (!aligned16(p.a) || !aligned16(p.b) || !aligned16(p.d) || (p.beta != 0.0f && !aligned16(p.c)))
    return "operand pointers must be 16-byte aligned";
  if (p.beta != 0.0f && p.c == nullptr) return "beta != 0 but no C";
  switch (t) {
    case SliceType::kBF16: return sm90::check_bf16(p);
    case SliceType::kFP16: return sm90::check_fp16(p);
    case SliceType::kTF32: return sm90::check_tf32(p);
  }
  return "unknown slice type";
}

size_t gemm_workspace_bytes(SliceType t, const GemmProblem& p) {
  switch (t) {
    case SliceType::kBF16: return sm90::workspace_bf16(p);
    case SliceType::kFP16: return sm90::workspace_fp16(p);
    case SliceType::kTF32: return sm90::workspace_tf32(p);
  }
  return 0;
}

std::string gemm_run(SliceType t, const GemmProblem& p, void* ws, size_t ws_bytes, cudaStream_t stream) {
  std::string why = gemm_check(t, p);
  if (!why.empty()) return why;
  if (ws_bytes < gemm_workspace_bytes(t, p)) return "workspace too small";
  switch (t) {
    case SliceType::kBF16: return sm90::run_bf16(p, ws, stream);
    case SliceType::kFP16: return sm90::run_fp16(p, ws, stream);
    case SliceType::kTF32: return sm90::run_tf32(p, ws, stream);
  }
  return "unknown slice type";
}

bool device_supported(int device, std::string* why) {
  int major = 0, minor = 0;
  cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cannot query the device: ") + cudaGetErrorString(e);
    return false;
  }
  if (major != 9) {
    if (why) *why = "the kernels are built for sm_90 (Hopper); this device is sm_" + std::to_string(major * 10 + minor);
    return false;
  }
  return true;
}

}  // namespace jaxemu
