// Checks and launch of the row statistics kernel (stats/row_stats.cuh).
#include <string>

#include "stats.h"
#include "stats/row_stats.cuh"

namespace jaxemu {
namespace stats {

// Rows of at least this many values take a block each (a warp each below).
constexpr int64_t kBlockRowK = 4096;
constexpr int64_t kMaxGrid = 2147483647;

std::string check(const RowStatsProblem& p) {
  if (p.batch < 0 || p.rows < 0 || p.k < 0) return "negative dimensions";
  if (p.a == nullptr || p.out == nullptr) return "no operand or output";
  const int64_t rows = p.batch * p.rows;
  if ((p.k >= kBlockRowK ? rows : (rows + 7) / 8) > kMaxGrid) return "too many rows for one grid";
  return "";
}

template <typename T, bool kProbe>
static void launch(const RowStatsProblem& p, cudaStream_t stream) {
  const int64_t rows = p.batch * p.rows;
  if (p.k >= kBlockRowK)
    row_stats_block_kernel<T, kProbe><<<unsigned(rows), 256, 0, stream>>>(p);
  else
    row_stats_warp_kernel<T, kProbe><<<unsigned((rows + 7) / 8), 256, 0, stream>>>(p);
}

template <typename T>
static void launch(const RowStatsProblem& p, cudaStream_t stream) {
  if (p.v != nullptr) launch<T, true>(p, stream);
  else launch<T, false>(p, stream);
}

std::string run(const RowStatsProblem& p, cudaStream_t stream) {
  std::string why = check(p);
  if (!why.empty()) return why;
  if (p.batch * p.rows == 0) return "";
  switch (p.element) {
    case Element::kF32: launch<float>(p, stream); break;
    case Element::kF16: launch<__half>(p, stream); break;
    case Element::kBF16: launch<__nv_bfloat16>(p, stream); break;
  }
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("row stats launch: ") + cudaGetErrorString(e);
}

}  // namespace stats
}  // namespace jaxemu
