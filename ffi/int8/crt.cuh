// Ozaki II reconstruction: per output element, its nmod raw int32 residue
// products give the balanced mixed-radix (Garner) digits in registers and
// the FP32 (FP64) value is written once (ffi/int8/params.h: CrtProblem; the
// kernels, four elements per thread, are in ffi/int8_dispatch.cu).
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "tables.h"
#include "modular.cuh"
#include "params.h"

namespace jaxemu {
namespace int8 {

// Residue l of an output element in [0, m_l): a raw int32 product reduced
// here (modular.cuh: mod_i32), or one the GEMM's epilogue reduced (uint8).
__host__ __device__ __forceinline__ int residue_of(int32_t raw, const CrtProblem& p, int l) {
  return mod_i32(raw, p.moduli[l], p.magic[l], p.c16[l], p.c31[l]);
}
__host__ __device__ __forceinline__ int residue_of(uint8_t r, const CrtProblem&, int) { return r; }

// Digit l of the balanced mixed-radix (Garner) representation, from the raw
// product (int32) or residue (uint8) of modulus l and the digits below it
// (v_l in (-m_l/2, m_l/2]).
template <int kN, class In>
__host__ __device__ __forceinline__ int garner_digit(const CrtProblem& p, int l, In raw, const int (&digit)[kN]) {
  const int ml = p.moduli[l];
  const int r = residue_of(raw, p, l);
  int s = 0;  // sum_{j<l} (W_j mod m_l) v_j: |s| < 20 * 256 * 128 < 2^20
#pragma unroll
  for (int j = 0; j < kN; ++j)
    if (j < l) s += p.wmod[l][j] * digit[j];
  const int s_mod = mod_u24(uint32_t(s + p.off20[l]), ml, p.magic[l]);  // 0 < s + off20 < 2^22
  // (r - s) / W_l mod m_l; (r - s_mod + m) inverse < 2 m^2 <= 2^17
  int v = mod_u24(uint32_t((r - s_mod + ml) * p.inverse[l]), ml, p.magic[l]);
  if (v >= (ml + 1) / 2) v -= ml;
  return v;
}

// The digits v_l (l < nmod <= kN) from the raw products raw[l]. The kernel
// passes kN = nmod, known at compile time: every raw product is loaded
// before the first digit needs it (a load behind a run-time guard waits for
// the arithmetic before it, one memory latency per modulus: the CRT had run
// at a third of memory speed that way, 2.33 ms at 8192^2 x 8 moduli on an H100).
template <int kN, class In>
__host__ __device__ __forceinline__ void crt_digits(const CrtProblem& p, int nmod, const In (&raw)[kN],
                                                    int (&digit)[kN]) {
#pragma unroll
  for (int l = 0; l < kN; ++l) digit[l] = l < nmod ? garner_digit(p, l, raw[l], digit) : 0;
}

// (batch, row, col) of output element idx: 32-bit divisions when the sizes
// allow (a 64-bit division by a run-time value costs several times more).
struct CrtPosition {
  int64_t b, row, col;
};
__host__ __device__ __forceinline__ CrtPosition crt_position(const CrtProblem& p, int64_t idx, int64_t total) {
  if (total <= int64_t(UINT32_MAX)) {
    const uint32_t i = uint32_t(idx), mn = uint32_t(p.m * p.n), n = uint32_t(p.n), bb = i / mn, rem = i - bb * mn;
    const uint32_t row = rem / n;
    return {int64_t(bb), int64_t(row), int64_t(rem - row * n)};
  }
  const int64_t mn = p.m * p.n, rem = idx % mn, row = rem / p.n;
  return {idx / mn, row, rem - row * p.n};
}

// -(row_exp + col_exp) of output element idx.
__host__ __device__ __forceinline__ int crt_scale(const CrtProblem& p, int64_t idx, int64_t total) {
  const CrtPosition q = crt_position(p, idx, total);
  return -(p.row_exp[q.b * p.m + q.row] + p.col_exp[q.b * p.n + q.col]);
}

// Float32 value of the digits: sum v_l W_l in double (relative error ~nmod
// 2^-53), times 2^scale, rounded once to float32 (subnormals, overflow: as a cast).
template <int kN>
__host__ __device__ __forceinline__ float crt_value(const CrtProblem& p, int nmod, const int (&digit)[kN], int scale) {
  double value = 0.0;
#pragma unroll
  for (int l = 0; l < kN; ++l)
    if (l < nmod) value += double(digit[l]) * p.weight[l];
  return float(ldexp(value, scale));
}

// The digits of output element idx from its raw products or residues (p.p
// or p.r), one element at a time (crt_element, crt_element64).
__host__ __device__ __forceinline__ void element_digits(const CrtProblem& p, int64_t idx, int64_t total,
                                                        int (&digit)[kMaxModuli]) {
  if (p.r) {
    uint8_t res[kMaxModuli];
#pragma unroll
    for (int l = 0; l < kMaxModuli; ++l) res[l] = l < p.nmod ? p.r[int64_t(l) * total + idx] : 0;
    crt_digits(p, p.nmod, res, digit);
    return;
  }
  int32_t raw[kMaxModuli];
#pragma unroll
  for (int l = 0; l < kMaxModuli; ++l) raw[l] = l < p.nmod ? p.p[int64_t(l) * total + idx] : 0;
  crt_digits(p, p.nmod, raw, digit);
}

// Float32 output element idx, one element at a time: the host reference
// (tests/native: kernel_check, crt_check against the Python reconstruction)
// and the kernel for outputs whose rows are not whole 16-byte vectors.
__host__ __device__ __forceinline__ float crt_element(const CrtProblem& p, int64_t idx, int64_t total) {
  int digit[kMaxModuli];
  element_digits(p, idx, total, digit);
  return crt_value(p, p.nmod, digit, crt_scale(p, idx, total));
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

// Float64 value of the digits: C' = sum v_l W_l exactly (Horner's rule from
// the top digit in 192-bit integers), times 2^scale, rounded once
// (ozaki2_f64: an error below DGEMM's needs more than a double sum).
template <int kN>
__host__ __device__ __forceinline__ double crt_value64(const CrtProblem& p, int nmod, const int (&digit)[kN],
                                                      int scale) {
  Int192 x;
#pragma unroll
  for (int l = kN - 1; l >= 0; --l)
    if (l < nmod) x.mul_add(l == nmod - 1 ? 1u : uint32_t(p.moduli[l]), digit[l]);
  const bool neg = x.negative();
  if (neg) x.negate();
  const double v = round_to_double(x, scale);
  return neg ? -v : v;
}

// Float64 output element idx, one at a time (as crt_element).
__host__ __device__ __forceinline__ double crt_element64(const CrtProblem& p, int64_t idx, int64_t total) {
  int digit[kMaxModuli];
  element_digits(p, idx, total, digit);
  return crt_value64(p, p.nmod, digit, crt_scale(p, idx, total));
}

}  // namespace int8
}  // namespace jaxemu
