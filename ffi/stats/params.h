// The row statistics of auto's data test (jaxemu/auto.py: operand_stats) for
// one operand A (batch, rows, k), row-major, float32, float16 or bfloat16:
// per row, over its finite values (NaN/Inf count as 0),
//   max |a|, min of the nonzero |a| (inf for none), sum |a|,
// and with a probe v (batch, k) float32 (finite), of t = a v:
//   sum t, sum |t|, max |t|, sum |t|^(1/8).
// out (n_stats, batch, rows) float32, n_stats = 3 (no probe) or 7.
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
};

}  // namespace stats
}  // namespace jaxemu
