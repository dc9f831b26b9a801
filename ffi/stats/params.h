// The statistics of auto's data test (jaxemu/auto.py: operand_stats), each
// operand read once.
//
// Rows of A (batch, rows, k), row-major, float32, float16 or bfloat16: per
// row, over its finite values (NaN/Inf count as 0),
//   max |a|, min of the nonzero |a| (inf for none), sum |a|,
// then 1 if the row holds a NaN or +-Inf, else 0 (auto then knows whether
// the product needs FP32's special-value rules without another conditional),
// and with a probe v (batch, k) float32 (finite), of t = a v:
//   sum t, sum |t|, max |t|, sum |t|^(1/8).
// out (n_stats, batch, rows) float32, n_stats = 4 (no probe) or 8. Each
// thread sums a known stretch of the row (K / threads values) and the
// threads' sums meet in a fixed tree: the probe's error is then ~K / 256
// float32 roundings, not K of them, which is what lets the test bound
// ||A v|| from below at a k-means update's K = 2^20
// (jaxemu/backends/cuda_stats.py: probe_roundings).
//
// Columns of B (batch, k, cols), row-major (cols contiguous): per column the
// same first four statistics, in two launches: partial ones over `chunks`
// equal slices of k (partial: (chunks, 4, batch, cols)), then their
// reduction in a fixed order (deterministic: no atomics) into out (4,
// batch, cols).
#pragma once

#include <cstdint>

namespace jaxemu {
namespace stats {

enum class Element { kF32, kF16, kBF16 };

struct RowStatsProblem {
  const void* a = nullptr;
  const float* v = nullptr;  // nullptr: no probe
  float* out = nullptr;
  Element element = Element::kF32;
  int64_t batch = 0, rows = 0, k = 0;
  // Threads per row of rows shorter than kBlockRowK (4, 8, 16 or 32: a
  // group of a warp; more rows per warp keep more loads in flight when a
  // row is a few hundred values); longer rows take a block of 256 each.
  int lanes = 32;
};

struct ColStatsProblem {
  const void* b = nullptr;
  float* partial = nullptr;  // (chunks, 4, batch, cols)
  float* out = nullptr;      // (4, batch, cols)
  Element element = Element::kF32;
  int64_t batch = 0, k = 0, cols = 0, chunks = 1;
};

}  // namespace stats
}  // namespace jaxemu
