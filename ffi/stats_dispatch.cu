// Checks and launches of the statistics kernels (stats/row_stats.cuh,
// stats/col_stats.cuh).
#include <string>

#include "stats.h"
#include "stats/col_stats.cuh"
#include "stats/row_stats.cuh"

namespace jaxemu {
namespace stats {

// Rows of at least this many values take a block each (a warp each below).
constexpr int64_t kBlockRowK = 4096;
constexpr int64_t kMaxGrid = 2147483647, kMaxGridYZ = 65535;

static std::string launched(const char* what) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string(what) + " launch: " + cudaGetErrorString(e);
}

std::string check(const RowStatsProblem& p) {
  if (p.batch < 0 || p.rows < 0 || p.k < 0) return "negative dimensions";
  if (p.a == nullptr || p.out == nullptr) return "no operand or output";
  const int64_t rows = p.batch * p.rows;
  if (p.lanes != 4 && p.lanes != 8 && p.lanes != 16 && p.lanes != 32) return "lanes must be 4, 8, 16 or 32";
  if ((p.k >= kBlockRowK ? rows : (rows * p.lanes + 255) / 256) > kMaxGrid) return "too many rows for one grid";
  return "";
}

template <typename T, bool kProbe>
static void launch(const RowStatsProblem& p, cudaStream_t stream) {
  const int64_t rows = p.batch * p.rows;
  if (p.k >= kBlockRowK) {
    row_stats_block_kernel<T, kProbe><<<unsigned(rows), 256, 0, stream>>>(p);
    return;
  }
  const unsigned blocks = unsigned((rows * p.lanes + 255) / 256);
  switch (p.lanes) {
    case 4: row_stats_warp_kernel<T, kProbe, 4><<<blocks, 256, 0, stream>>>(p); break;
    case 8: row_stats_warp_kernel<T, kProbe, 8><<<blocks, 256, 0, stream>>>(p); break;
    case 16: row_stats_warp_kernel<T, kProbe, 16><<<blocks, 256, 0, stream>>>(p); break;
    default: row_stats_warp_kernel<T, kProbe, 32><<<blocks, 256, 0, stream>>>(p); break;
  }
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
  return launched("row stats");
}

template <typename T>
static int vector_width(const ColStatsProblem& p) {
  return (p.cols % kVec<T> == 0 && reinterpret_cast<uintptr_t>(p.b) % 16 == 0) ? kVec<T> : 1;
}

std::string check(const ColStatsProblem& p) {
  if (p.batch < 0 || p.k < 0 || p.cols < 0) return "negative dimensions";
  if (p.chunks < 1 || p.chunks > kMaxGridYZ) return "chunks must be in 1..65535";
  if (p.batch > kMaxGridYZ) return "batch must be at most 65535";
  if (p.b == nullptr || p.out == nullptr || p.partial == nullptr) return "no operand or output";
  return "";
}

template <typename T>
static void launch(const ColStatsProblem& p, cudaStream_t stream) {
  const int v = vector_width<T>(p);
  const int64_t strips = (p.cols + int64_t(kColThreads) * v - 1) / (int64_t(kColThreads) * v);
  const dim3 grid(unsigned(strips), unsigned(p.chunks), unsigned(p.batch));
  if (v == 1) col_partial_kernel<T, 1><<<grid, kColThreads * kRowGroups, 0, stream>>>(p);
  else col_partial_kernel<T, kVec<T>><<<grid, kColThreads * kRowGroups, 0, stream>>>(p);
}

std::string run(const ColStatsProblem& p, cudaStream_t stream) {
  std::string why = check(p);
  if (!why.empty()) return why;
  if (p.batch * p.cols == 0) return "";
  switch (p.element) {
    case Element::kF32: launch<float>(p, stream); break;
    case Element::kF16: launch<__half>(p, stream); break;
    case Element::kBF16: launch<__nv_bfloat16>(p, stream); break;
  }
  why = launched("column stats");
  if (!why.empty()) return why;
  col_reduce_kernel<<<unsigned((p.batch * p.cols + kReduceCols - 1) / kReduceCols), kReduceCols * kReduceSlices, 0,
                      stream>>>(p);
  return launched("column stats reduction");
}

}  // namespace stats
}  // namespace jaxemu
