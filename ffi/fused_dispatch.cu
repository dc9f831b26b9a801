// Checks and dispatch of the fused GEMM by slice type and tile width.
#include <cstdint>
#include <string>

#include "fused.h"

namespace jaxemu {
namespace fused {

#define JAXEMU_FUSED_DECLARE(name) \
  std::string run_##name##_n128(const Problem&, cudaStream_t); \
  std::string run_##name##_n192(const Problem&, cudaStream_t);
JAXEMU_FUSED_DECLARE(bf16)
JAXEMU_FUSED_DECLARE(fp16)
JAXEMU_FUSED_DECLARE(tf32)
#undef JAXEMU_FUSED_DECLARE

int tile_k(SliceType t) { return t == SliceType::kTF32 ? 32 : 64; }
int k_align(SliceType t) { return tile_k(t); }

static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

std::string check(SliceType t, const Problem& p) {
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.batch < 1) return "empty problem (the caller handles zero-sized dims)";
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX) return "dimension too large for TMA coordinates";
  if (p.sa < 1 || p.sb < 1 || p.sa * p.batch > INT32_MAX || p.sb * p.batch > INT32_MAX) return "bad slice counts";
  if (p.k % k_align(t)) return "K = " + std::to_string(p.k) + " is not a multiple of " + std::to_string(k_align(t));
  if (p.tile_n != 128 && p.tile_n != 192) return "tile_n must be 128 or 192";
  if (p.nterms < 1 || p.nterms > kMaxTerms) return "nterms must be in 1.." + std::to_string(kMaxTerms);
  int64_t k_tiles = (p.k + tile_k(t) - 1) / tile_k(t);
  int64_t chunks = 0;
  for (int i = 0; i < p.nterms; ++i) {
    if (p.term_a[i] < 0 || p.term_a[i] >= p.sa || p.term_b[i] < 0 || p.term_b[i] >= p.sb)
      return "term " + std::to_string(i) + " names a slice that does not exist";
    if (p.term_exp[i] < -126 || p.term_exp[i] > 127) return "term weight exponent out of range";
    if (p.kc_tiles[i] < 1) return "promotion interval must be >= 1 tile";
    chunks += (k_tiles + p.kc_tiles[i] - 1) / p.kc_tiles[i];
  }
  if (p.splits < 1 || p.splits > chunks) return "splits must be in 1..(number of chunks)";
  if (!aligned16(p.a) || !aligned16(p.b) || !aligned16(p.c)) return "operand pointers must be 16-byte aligned";
  if (p.nonfinite == nullptr) return "no nonfinite flag";
  if ((p.row_exp == nullptr) != (p.col_exp == nullptr)) return "row and column exponents come together";
  return "";
}

std::string run(SliceType t, const Problem& p, cudaStream_t stream) {
  std::string why = check(t, p);
  if (!why.empty()) return why;
  const bool wide = p.tile_n == 192;
  switch (t) {
    case SliceType::kBF16: return wide ? run_bf16_n192(p, stream) : run_bf16_n128(p, stream);
    case SliceType::kFP16: return wide ? run_fp16_n192(p, stream) : run_fp16_n128(p, stream);
    case SliceType::kTF32: return wide ? run_tf32_n192(p, stream) : run_tf32_n128(p, stream);
  }
  return "unknown slice type";
}

}  // namespace fused

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
