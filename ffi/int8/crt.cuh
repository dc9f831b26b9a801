// Ozaki II reconstruction: one thread per output element reads its nmod raw
// int32 residue products, forms the balanced mixed-radix (Garner) digits in
// registers and writes the FP32 value once (ffi/int8/params.h: CrtProblem;
// the kernel itself is in ffi/int8_dispatch.cu).
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "tables.h"
#include "modular.cuh"
#include "params.h"

namespace jaxemu {
namespace int8 {

// x mod m in [0, m) for any int32 x: x + 2^31 = (hi + 2^15) 2^16 + lo, both
// parts nonnegative, and (hi + 2^15) (2^16 mod m) + lo < 2^16 * 256 = 2^24.
__host__ __device__ __forceinline__ int mod_i32(int32_t x, const CrtProblem& p, int l) {
  const uint32_t hi = uint32_t((x >> 16) + 32768), lo = uint32_t(x) & 0xFFFFu;
  int r = mod_u24(hi * uint32_t(p.c16[l]) + lo, p.moduli[l], p.magic[l]) - p.c31[l];
  return r < 0 ? r + p.moduli[l] : r;
}

// Output element idx of `total` = batch * m * n from the raw products
// p[l * total + idx]. Host and device (tests/test_int8_host.py runs it on the
// CPU against the Python reconstruction). Loops run to kMaxModuli with a
// guard, so that the digits stay in registers.
__host__ __device__ __forceinline__ float crt_element(const CrtProblem& p, int64_t idx, int64_t total) {
  int digit[kMaxModuli];
  double value = 0.0;
#pragma unroll
  for (int l = 0; l < kMaxModuli; ++l) {
    if (l < p.nmod) {
      const int ml = p.moduli[l];
      const int r = mod_i32(p.p[int64_t(l) * total + idx], p, l);
      int s = 0;  // sum_{j<l} (W_j mod m_l) v_j: |s| < 20 * 256 * 128 < 2^20
#pragma unroll
      for (int j = 0; j < l; ++j) s += p.wmod[l][j] * digit[j];
      const int s_mod = mod_u24(uint32_t(s + p.off20[l]), ml, p.magic[l]);  // 0 < s + off20 < 2^22
      // (r - s) / W_l mod m_l; (r - s_mod + m) inverse < 2 m^2 <= 2^17
      int v = mod_u24(uint32_t((r - s_mod + ml) * p.inverse[l]), ml, p.magic[l]);
      if (v >= (ml + 1) / 2) v -= ml;
      digit[l] = v;
      value += double(v) * p.weight[l];
    }
  }
  // The output's row and column: 32-bit divisions when the sizes allow (a
  // 64-bit division by a run-time value costs several times more).
  int64_t b, row, col;
  if (total <= int64_t(UINT32_MAX)) {
    const uint32_t i = uint32_t(idx), mn = uint32_t(p.m * p.n), n = uint32_t(p.n), bb = i / mn, rem = i - bb * mn;
    b = bb;
    row = rem / n;
    col = rem - uint32_t(row) * n;
  } else {
    const int64_t mn = p.m * p.n, rem = idx % mn;
    b = idx / mn;
    row = rem / p.n;
    col = rem - row * p.n;
  }
  const int e = -(p.row_exp[b * p.m + row] + p.col_exp[b * p.n + col]);
  return float(ldexp(value, e));  // one rounding to float32 (subnormals, overflow: as a cast)
}

}  // namespace int8
}  // namespace jaxemu
