// Checks and launches of the MixPert split (ffi/mixpert/split.cuh).
#include <string>

#include "mixpert.h"
#include "mixpert/split.cuh"

namespace jaxemu {
namespace mixpert {

namespace {
constexpr int kRowChunks = 2;  // 128-step chunks per warp in the rows kernel (loads in flight)
constexpr int64_t kMaxGrid = 2147483647;

int64_t split_blocks(const SplitProblem& p) {
  const int64_t chunks = p.k / kTileK;
  if (p.columns) return p.batch * chunks * ((p.rows + kColTile - 1) / kColTile);
  const int64_t warps = p.batch * p.rows * ((chunks + kRowChunks - 1) / kRowChunks);
  return (warps + kSplitThreads / 32 - 1) / (kSplitThreads / 32);
}

template <int S>
void launch_split(const SplitProblem& p, cudaStream_t stream) {
  const unsigned blocks = unsigned(split_blocks(p));
  if (p.columns) split_columns_kernel<S><<<blocks, kSplitThreads, 0, stream>>>(p);
  else split_rows_kernel<S, kRowChunks><<<blocks, kSplitThreads, 0, stream>>>(p);
}
}  // namespace

std::string check(const SplitProblem& p) {
  if (p.s != 2 && p.s != 3) return "slices per value must be 2 or 3 (MixPert levels I-IV), got " + std::to_string(p.s);
  if (p.rows < 0 || p.k < 0 || p.batch < 0) return "negative dimensions";
  if (p.k % kTileK) return "K = " + std::to_string(p.k) + " is not a multiple of " + std::to_string(kTileK);
  if (p.max_spread < 0 || p.max_spread > 40) return "max_spread must be in 0..40";
  if (split_blocks(p) > kMaxGrid) return "operand too large for one grid";
  if (p.batch * p.rows * p.k > 0 && (!p.x || !p.slices || !p.exps || !p.ok)) return "null operand";
  return "";
}

std::string run(const SplitProblem& p, cudaStream_t stream) {
  std::string why = check(p);
  if (!why.empty()) return why;
  if (p.batch * p.rows * p.k == 0) return "";
  if (p.s == 2) launch_split<2>(p, stream);
  else launch_split<3>(p, stream);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("split launch: ") + cudaGetErrorString(e);
}

}  // namespace mixpert
}  // namespace jaxemu
