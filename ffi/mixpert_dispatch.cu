// Checks and dispatch of the MixPert kernel (ffi/mixpert.h): one
// instantiation per level and number of consumer warpgroups
// (ffi/mixpert/inst/), chosen here per shape.
#include <string>

#include <cuda_runtime.h>

#include "mixpert.h"

namespace jaxemu {
namespace mixpert {

std::string run_l1_wg2(const Problem&, int, cudaStream_t);
std::string run_l2_wg2(const Problem&, int, cudaStream_t);
std::string run_l3_wg2(const Problem&, int, cudaStream_t);
std::string run_l4_wg2(const Problem&, int, cudaStream_t);
std::string run_l1_wg3(const Problem&, int, cudaStream_t);
std::string run_l2_wg3(const Problem&, int, cudaStream_t);
std::string run_l3_wg3(const Problem&, int, cudaStream_t);
std::string run_l4_wg3(const Problem&, int, cudaStream_t);

namespace {
using Runner = std::string (*)(const Problem&, int, cudaStream_t);
// Level (l, r) keeps l + 1 slices of A and r + 1 of B.
Runner runner(int sa, int sb, int warpgroups) {
  const bool three = warpgroups == 3;
  if (sa == 2 && sb == 2) return three ? run_l1_wg3 : run_l1_wg2;
  if (sa == 2 && sb == 3) return three ? run_l2_wg3 : run_l2_wg2;
  if (sa == 3 && sb == 2) return three ? run_l3_wg3 : run_l3_wg2;
  if (sa == 3 && sb == 3) return three ? run_l4_wg3 : run_l4_wg2;
  return nullptr;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

// Three consumer warpgroups (192-row tiles) issue the per-tile fold from one
// more warp while another waits for its products: on an H200 the kernel ran
// 4 % (int8_l4) to 8 % (int8_l1) faster at 8192^3 with C's bits unchanged,
// but 30-40 % slower where the output has few tiles (docs/performance.md,
// stop 51). So: whichever needs fewer tile-rows per SM over the persistent
// grid's waves, the 192-row tile counted at 0.95 of its rows; two where K is
// split (the splits were chosen for 128-row tiles: cuda_mixpert.splits_for).
int consumer_warpgroups(const Problem& p, int sms) {
  if (p.splits != 1 || sms < 1) return 2;
  const int64_t tiles_n = ceil_div(p.n, kTileN) * p.batch, rows2 = 2 * kWarpgroupRows, rows3 = 3 * kWarpgroupRows;
  const double two = double(ceil_div(ceil_div(p.m, rows2) * tiles_n, sms)) * rows2;
  const double three = double(ceil_div(ceil_div(p.m, rows3) * tiles_n, sms)) * rows3 * 0.95;
  return three < two ? 3 : 2;
}

std::string check(const Problem& p) {
  if (runner(p.sa, p.sb, 2) == nullptr)
    return "no kernel for " + std::to_string(p.sa) + " x " + std::to_string(p.sb) +
           " slices (MixPert levels I-IV: 2 or 3 each)";
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.batch < 1) return "empty problem (the caller handles it)";
  if (p.k % kTileK) return "K = " + std::to_string(p.k) + " is not a multiple of " + std::to_string(kTileK);
  if (p.m >= (int64_t(1) << 31) || p.n >= (int64_t(1) << 31) || p.k >= (int64_t(1) << 31) ||
      p.batch >= (int64_t(1) << 31))
    return "dimensions beyond 32-bit TMA coordinates";
  if (p.splits < 1 || p.splits > p.k / kTileK) return "splits must be in 1..K / " + std::to_string(kTileK);
  if (p.warpgroups != 0 && p.warpgroups != 2 && p.warpgroups != 3)
    return "consumer warpgroups must be 2 or 3 (or 0: by shape), not " + std::to_string(p.warpgroups);
  if (!p.a || !p.b || !p.scale_a || !p.scale_b || !p.c) return "null operand";
  return "";
}

std::string run(const Problem& p, cudaStream_t stream) {
  std::string why = check(p);
  if (!why.empty()) return why;
  int device = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return std::string("cannot query the device: ") + cudaGetErrorString(e);
  return runner(p.sa, p.sb, p.warpgroups ? p.warpgroups : consumer_warpgroups(p, sms))(p, sms, stream);
}

}  // namespace mixpert
}  // namespace jaxemu
