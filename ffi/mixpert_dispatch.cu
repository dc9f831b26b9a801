// Checks and dispatch of the MixPert kernel (ffi/mixpert.h): one
// instantiation per level (ffi/mixpert/inst/).
#include <string>

#include "mixpert.h"

namespace jaxemu {
namespace mixpert {

std::string run_l1(const Problem&, cudaStream_t);
std::string run_l2(const Problem&, cudaStream_t);
std::string run_l3(const Problem&, cudaStream_t);
std::string run_l4(const Problem&, cudaStream_t);

namespace {
using Runner = std::string (*)(const Problem&, cudaStream_t);
// Level (l, r) keeps l + 1 slices of A and r + 1 of B.
Runner runner(int sa, int sb) {
  if (sa == 2 && sb == 2) return run_l1;
  if (sa == 2 && sb == 3) return run_l2;
  if (sa == 3 && sb == 2) return run_l3;
  if (sa == 3 && sb == 3) return run_l4;
  return nullptr;
}
}  // namespace

std::string check(const Problem& p) {
  if (runner(p.sa, p.sb) == nullptr)
    return "no kernel for " + std::to_string(p.sa) + " x " + std::to_string(p.sb) +
           " slices (MixPert levels I-IV: 2 or 3 each)";
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.batch < 1) return "empty problem (the caller handles it)";
  if (p.k % kTileK) return "K = " + std::to_string(p.k) + " is not a multiple of " + std::to_string(kTileK);
  if (p.m >= (int64_t(1) << 31) || p.n >= (int64_t(1) << 31) || p.k >= (int64_t(1) << 31) ||
      p.batch >= (int64_t(1) << 31))
    return "dimensions beyond 32-bit TMA coordinates";
  if (p.splits < 1 || p.splits > p.k / kTileK) return "splits must be in 1..K / " + std::to_string(kTileK);
  if (!p.a || !p.b || !p.scale_a || !p.scale_b || !p.c) return "null operand";
  return "";
}

std::string run(const Problem& p, cudaStream_t stream) {
  std::string why = check(p);
  if (!why.empty()) return why;
  return runner(p.sa, p.sb)(p, stream);
}

}  // namespace mixpert
}  // namespace jaxemu
