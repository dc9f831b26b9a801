// Checks and launches of MixPert's float fallback (ffi/mixpert/fallback.cuh).
#include <algorithm>
#include <string>

#include "mixpert.h"
#include "mixpert/fallback.cuh"

namespace jaxemu {
namespace mixpert {

namespace {
// Items (line, part) in all, at most: a line's chunks of the other dimension
// are spread over up to this many / lines parts (each part a scan of the
// line's flags: measured at 8192^3, 1M items of 256 flags cost ~1 ms).
constexpr int64_t kItemsTarget = int64_t(1) << 17;
constexpr int kBlocksPerSM = 8;  // the grid: up to this many blocks per SM, looping over the items

int64_t parts_for(int64_t lines, int64_t other, int64_t chunk) {
  const int64_t chunks = std::max<int64_t>(1, (other + chunk - 1) / chunk);
  return std::min(chunks, std::max<int64_t>(1, kItemsTarget / std::max<int64_t>(1, lines)));
}

unsigned blocks_for(int64_t items) {
  static const int sms = [] {
    int device = 0, n = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device);
    return n > 0 ? n : 132;
  }();
  const int64_t needed = (items + kFallbackThreads / 32 - 1) / (kFallbackThreads / 32);
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(needed, int64_t(sms) * kBlocksPerSM)));
}
}  // namespace

std::string check(const FallbackProblem& p) {
  if (p.m < 0 || p.n < 0 || p.k < 0 || p.batch < 0) return "negative dimensions";
  if (p.k % kTileK) return "K = " + std::to_string(p.k) + " is not a multiple of " + std::to_string(kTileK);
  if (p.batch * p.m * p.n * p.k > 0 && (!p.c || !p.a || !p.b || !p.ok_a || !p.ok_bt)) return "null operand";
  return "";
}

std::string run(const FallbackProblem& p, cudaStream_t stream) {
  std::string why = check(p);
  if (!why.empty()) return why;
  if (p.batch * p.m * p.n * p.k == 0) return "";
  const int64_t rows = p.batch * p.m, cols = p.batch * p.n;
  const int64_t row_parts = parts_for(rows, p.n, 32 * kRowsCols), col_parts = parts_for(cols, p.m, 32 * kColsRows);
  fallback_rows_kernel<<<blocks_for(rows * row_parts), kFallbackThreads, 0, stream>>>(p, row_parts);
  fallback_columns_kernel<<<blocks_for(cols * col_parts), kFallbackThreads, 0, stream>>>(p, col_parts);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("fallback launch: ") + cudaGetErrorString(e);
}

}  // namespace mixpert
}  // namespace jaxemu
