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

// The balanced mixed-radix (Garner) digits v_l (l < p.nmod) of output
// element idx of `total` = batch * m * n, from its raw products
// p[l * total + idx]. Loops run to kMaxModuli with a guard, so that the
// digits stay in registers.
__host__ __device__ __forceinline__ void crt_digits(const CrtProblem& p, int64_t idx, int64_t total,
                                                    int (&digit)[kMaxModuli]) {
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
    }
  }
}

// -(row_exp + col_exp) of output element idx: 32-bit divisions when the
// sizes allow (a 64-bit division by a run-time value costs several times more).
__host__ __device__ __forceinline__ int crt_scale(const CrtProblem& p, int64_t idx, int64_t total) {
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
  return -(p.row_exp[b * p.m + row] + p.col_exp[b * p.n + col]);
}

// Float32 output element idx: sum v_l W_l in double (relative error ~nmod
// 2^-53), rounded once to float32. Host and device (tests/test_int8_host.py
// runs it on the CPU against the Python reconstruction).
__host__ __device__ __forceinline__ float crt_element(const CrtProblem& p, int64_t idx, int64_t total) {
  int digit[kMaxModuli];
  crt_digits(p, idx, total, digit);
  double value = 0.0;
#pragma unroll
  for (int l = 0; l < kMaxModuli; ++l)
    if (l < p.nmod) value += double(digit[l]) * p.weight[l];
  return float(ldexp(value, crt_scale(p, idx, total)));  // one rounding to float32 (subnormals, overflow: as a cast)
}

// A 192-bit two's complement integer, arithmetic modulo 2^192: C' of up to
// 20 moduli (|C'| < M / 4 < 2^158) is exact in it.
struct Int192 {
  uint64_t w[3] = {0, 0, 0};  // little-endian words

  // *this = *this * m + v for 0 < m < 2^32 and a small signed v.
  __host__ __device__ __forceinline__ void mul_add(uint32_t m, int64_t v) {
    unsigned __int128 t = (unsigned __int128)w[0] * m + uint64_t(v);
    w[0] = uint64_t(t);
    const uint64_t ext = v < 0 ? ~uint64_t(0) : 0;  // v's sign extension
    t = (unsigned __int128)w[1] * m + (t >> 64) + ext;
    w[1] = uint64_t(t);
    w[2] = w[2] * m + uint64_t(t >> 64) + ext;
  }
  __host__ __device__ __forceinline__ bool negative() const { return (w[2] >> 63) != 0; }
  __host__ __device__ __forceinline__ void negate() {
    w[0] = ~w[0], w[1] = ~w[1], w[2] = ~w[2];
    w[0] += 1;
    const uint64_t c0 = w[0] == 0;
    w[1] += c0;
    w[2] += (c0 && w[1] == 0);
  }
  // Word k (0 past the top), by selects: a run-time index would put w in local memory.
  __host__ __device__ __forceinline__ uint64_t word(int k) const {
    return k == 0 ? w[0] : k == 1 ? w[1] : k == 2 ? w[2] : 0;
  }
  __host__ __device__ __forceinline__ bool bit(int i) const { return (word(i >> 6) >> (i & 63)) & 1; }
  // The index of the highest set bit, -1 for zero.
  __host__ __device__ __forceinline__ int top_bit() const {
#pragma unroll
    for (int i = 2; i >= 0; --i)
      if (w[i]) {
#ifdef __CUDA_ARCH__
        return 64 * i + 63 - __clzll((long long)w[i]);
#else
        return 64 * i + 63 - __builtin_clzll(w[i]);
#endif
      }
    return -1;
  }
  // Bits [lo, lo + 64) (lo >= 0), zeros above the top word.
  __host__ __device__ __forceinline__ uint64_t bits_from(int lo) const {
    const int k = lo >> 6, o = lo & 63;
    return (word(k) >> o) | (o ? word(k + 1) << (64 - o) : 0);
  }
  // Whether any bit below `lo` is set.
  __host__ __device__ __forceinline__ bool any_below(int lo) const {
    bool any = false;
#pragma unroll
    for (int i = 0; i < 3; ++i) {
      const int start = 64 * i;
      if (lo >= start + 64) any |= w[i] != 0;
      else if (lo > start) any |= (w[i] & ((uint64_t(1) << (lo - start)) - 1)) != 0;
    }
    return any;
  }
};

// A nonnegative Int192 times 2^s, rounded once to the nearest double (ties
// to even), subnormal results included; Inf past DBL_MAX.
__host__ __device__ __forceinline__ double round_to_double(const Int192& mag, int s) {
  const int top = mag.top_bit();
  if (top < 0) return 0.0;
  // The lowest kept bit: 53 significant bits, or 2^-1074 for subnormal results.
  int lsb = top - 52;
  if (lsb < -1074 - s) lsb = -1074 - s;
  if (lsb <= 0) return ldexp(double(mag.w[0]), s);  // mag < 2^53: exact
  if (lsb > top + 1) return 0.0;                    // below half the least subnormal
  uint64_t q = mag.bits_from(lsb);                  // < 2^53
  const bool half = mag.bit(lsb - 1), sticky = mag.any_below(lsb - 1);
  if (half && (sticky || (q & 1))) ++q;
  return ldexp(double(q), lsb + s);  // exact: q <= 2^53, its exponent within range (or Inf)
}

// Float64 output element idx: C' = sum v_l W_l exactly (Horner's rule from
// the top digit in 192-bit integers), times 2^-(row_exp + col_exp), rounded
// once (ozaki2_f64: an error below DGEMM's needs more than a double sum).
__host__ __device__ __forceinline__ double crt_element64(const CrtProblem& p, int64_t idx, int64_t total) {
  int digit[kMaxModuli];
  crt_digits(p, idx, total, digit);
  Int192 x;
#pragma unroll
  for (int l = kMaxModuli - 1; l >= 0; --l)
    if (l < p.nmod) x.mul_add(l == p.nmod - 1 ? 1u : uint32_t(p.moduli[l]), digit[l]);
  const bool neg = x.negative();
  if (neg) x.negate();
  const double v = round_to_double(x, crt_scale(p, idx, total));
  return neg ? -v : v;
}

}  // namespace int8
}  // namespace jaxemu
