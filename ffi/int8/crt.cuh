// Ozaki II reconstruction: one thread per output element reads its nmod raw
// int32 residue products, forms the balanced mixed-radix (Garner) digits in
// registers and writes the FP32 value once (ffi/int8/params.h: CrtProblem;
// the kernel itself is in ffi/int8_dispatch.cu).
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "crt_tables.h"
#include "params.h"

namespace jaxemu {
namespace int8 {

__host__ __device__ __forceinline__ int mod_nonneg(int x, int m) {
  int r = x % m;
  return r < 0 ? r + m : r;
}

// Output element idx of `total` = batch * m * n from the raw products
// p[l * total + idx]. Host and device (tests/test_cuda_int8_host.py runs it
// on the CPU against the Python reconstruction). Loops run to kMaxModuli with
// a guard, so that the digits stay in registers.
__host__ __device__ __forceinline__ float crt_element(const CrtProblem& p, int64_t idx, int64_t total) {
  int digit[kMaxModuli];
  double value = 0.0;
#pragma unroll
  for (int l = 0; l < kMaxModuli; ++l) {
    if (l < p.nmod) {
      const int ml = p.moduli[l];
      const int r = mod_nonneg(p.p[int64_t(l) * total + idx], ml);
      int s = 0;  // sum_{j<l} (W_j mod m_l) v_j: |s| < 20 * 256 * 128
#pragma unroll
      for (int j = 0; j < l; ++j) s += p.wmod[l][j] * digit[j];
      int v = mod_nonneg((r - mod_nonneg(s, ml)) * p.inverse[l], ml);
      if (v >= (ml + 1) / 2) v -= ml;
      digit[l] = v;
      value += double(v) * p.weight[l];
    }
  }
  const int64_t mn = p.m * p.n;
  const int64_t b = idx / mn, rem = idx - b * mn, row = rem / p.n, col = rem - row * p.n;
  const int e = -(p.row_exp[b * p.m + row] + p.col_exp[b * p.n + col]);
  return float(ldexp(value, e));  // one rounding to float32 (subnormals, overflow: as a cast)
}

}  // namespace int8
}  // namespace jaxemu
