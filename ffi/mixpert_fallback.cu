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

int sm_count() {
  static const int sms = [] {
    int device = 0, n = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device);
    return n > 0 ? n : 132;
  }();
  return sms;
}

unsigned blocks_for(int64_t items) {
  const int sms = sm_count();
  const int64_t needed = (items + kFallbackThreads / 32 - 1) / (kFallbackThreads / 32);
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(needed, int64_t(sms) * kBlocksPerSM)));
}
// A tile kernel's grid: (batch, K-tile, chunk of the other dimension)
// items, each split into as many segments of its scan of `lines` flags as
// it takes to fill the GPU (kBlocksPerSM blocks per SM); 0 where the grid
// would be too large (that side then goes line by line: the same bits).
int64_t tile_blocks(int64_t batch, int64_t nt, int64_t other, int64_t lines, int64_t* segments) {
  const int64_t items = batch * nt * ((other + kTileThreads - 1) / kTileThreads), passes = tile_passes(lines);
  const int64_t target = int64_t(sm_count()) * kBlocksPerSM;
  *segments = std::max<int64_t>(1, std::min<int64_t>(passes, (target + items - 1) / items));
  return items * *segments <= int64_t(0x7FFFFFFF) ? items * *segments : 0;
}
}  // namespace

std::string check(const FallbackProblem& p) {
  if (p.m < 0 || p.n < 0 || p.k < 0 || p.batch < 0) return "negative dimensions";
  if (p.k % kTileK) return "K = " + std::to_string(p.k) + " is not a multiple of " + std::to_string(kTileK);
  if (p.batch * p.m * p.n * p.k > 0 && (!p.c || !p.a || !p.b || !p.ok_a || !p.ok_bt || (p.rows_tiles && !p.ok_at) ||
                                        (p.columns_tiles && !p.ok_b) || ((p.rows_tiles || p.columns_tiles) && !p.work)))
    return "null operand";
  return "";
}

std::string run(const FallbackProblem& problem, cudaStream_t stream) {
  std::string why = check(problem);
  if (!why.empty()) return why;
  if (problem.batch * problem.m * problem.n * problem.k == 0) return "";
  FallbackProblem p = problem;
  const int64_t rows = p.batch * p.m, cols = p.batch * p.n, nt = p.k / kScaleTile;
  const int64_t row_parts = parts_for(rows, p.n, 32 * kRowsCols), col_parts = parts_for(cols, p.m, 32 * kColsRows);
  int64_t row_segments = 1, col_segments = 1;
  const int64_t row_tile_blocks = p.rows_tiles ? tile_blocks(p.batch, nt, p.n, p.m, &row_segments) : 0;
  const int64_t col_tile_blocks = p.columns_tiles ? tile_blocks(p.batch, nt, p.m, p.n, &col_segments) : 0;
  // (int32 line lists: a side goes tile by tile only where its lines fit them.)
  p.rows_tiles = row_tile_blocks > 0 && rows < (int64_t(1) << 31);
  p.columns_tiles = col_tile_blocks > 0 && cols < (int64_t(1) << 31);
  int32_t* row_list = p.work;
  int32_t* col_list = p.work + rows;
  int32_t* counts = p.work + rows + cols;
  if (p.rows_tiles || p.columns_tiles) {
    cudaError_t e = cudaMemsetAsync(counts, 0, 2 * sizeof(int32_t), stream);
    if (e != cudaSuccess) return std::string("fallback: ") + cudaGetErrorString(e);
  }
  // A side tile by tile: its single-tile lines K-tile by K-tile, then the
  // lines with several flagged tiles listed and walked, every chunk of the
  // other dimension in parallel. Otherwise every line walked by its parts.
  const unsigned full = unsigned(sm_count() * kBlocksPerSM);
  Lines all_rows, all_cols, listed_rows, listed_cols;
  all_rows.all = rows, all_cols.all = cols;
  listed_rows.list = row_list, listed_rows.count = counts;
  listed_cols.list = col_list, listed_cols.count = counts + 1;
  if (p.rows_tiles) {
    fallback_rows_tiles_kernel<<<unsigned(row_tile_blocks), kTileThreads, 0, stream>>>(p, row_segments);
    multi_lines_kernel<<<blocks_for(rows), kFallbackThreads, 0, stream>>>(p.ok_a, rows, nt, row_list, counts);
    fallback_rows_kernel<<<full, kFallbackThreads, 0, stream>>>(p, (p.n + 32 * kRowsCols - 1) / (32 * kRowsCols),
                                                                 listed_rows);
  } else {
    fallback_rows_kernel<<<blocks_for(rows * row_parts), kFallbackThreads, 0, stream>>>(p, row_parts, all_rows);
  }
  if (p.columns_tiles) {
    fallback_columns_tiles_kernel<<<unsigned(col_tile_blocks), kTileThreads, 0, stream>>>(p, col_segments);
    multi_lines_kernel<<<blocks_for(cols), kFallbackThreads, 0, stream>>>(p.ok_bt, cols, nt, col_list, counts + 1);
    fallback_columns_kernel<<<full, kFallbackThreads, 0, stream>>>(p, (p.m + 32 * kColsRows - 1) / (32 * kColsRows),
                                                                    listed_cols);
  } else {
    fallback_columns_kernel<<<blocks_for(cols * col_parts), kFallbackThreads, 0, stream>>>(p, col_parts, all_cols);
  }
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("fallback launch: ") + cudaGetErrorString(e);
}

}  // namespace mixpert
}  // namespace jaxemu
