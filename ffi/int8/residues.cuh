// Ozaki II residues (ffi/int8/params.h: ResidueProblem): each operand value
// scaled by its row's power of two and rounded to an integer q, exactly, then
// q's symmetric int8 residue modulo every m_l, written in the int8 GEMM's
// layout. This header holds what one thread computes, for host and device
// (tests/native/residue_check.cu runs it on the CPU against an exact numpy
// reference); the kernels that stage the reads are in ffi/int8_dispatch.cu.
//
// Why a kernel: in XLA the residue step was one fusion per modulus-sized
// output, and B's residues read B column-wise (K contiguous is what int8
// wgmma needs); it took 7.4 of ozaki2_f32's 17.2 ms at 8192^3 on an H100
// (docs/performance.md). Here each operand is read once and its nmod int8
// residues written once, in coalesced 4- or 16-byte pieces.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "../common/bits.cuh"
#include "../common/tiles.cuh"
#include "modular.cuh"
#include "params.h"

namespace jaxemu {
namespace int8 {

// The bit layout of float and double.
template <class T>
struct FloatBits;
template <>
struct FloatBits<float> {
  using Bits = uint32_t;
  using Magnitude = uint32_t;  // |q| <= 2^30 (ResidueProblem)
  static constexpr int kMantissa = 23;
  static constexpr int kExponentMask = 0xFF;
  static constexpr int kMinExponent = -149;  // the least subnormal is 2^-149
};
template <>
struct FloatBits<double> {
  using Bits = uint64_t;
  using Magnitude = uint64_t;  // |q| <= 2^62
  static constexpr int kMantissa = 52;
  static constexpr int kExponentMask = 0x7FF;
  static constexpr int kMinExponent = -1074;
};

// round(|x| 2^e) to the nearest integer, ties to even (jnp.round's rule),
// and the sign of x, for finite x: integer arithmetic on the significand,
// so exact for subnormals too (XLA's float scaling flushes them on the CPU).
// |x 2^e| must stay below 2^62 (the caller's exponents keep it below 2^30
// for float, 2^62 for double); larger shifts are clamped, not undefined.
template <class T>
__host__ __device__ __forceinline__ typename FloatBits<T>::Magnitude scaled_magnitude(T x, int e, bool* negative) {
  using F = FloatBits<T>;
  using Bits = typename F::Bits;
  const Bits u = bits_of(x);
  *negative = (u >> (8 * sizeof(Bits) - 1)) != 0;
  const int field = int((u >> F::kMantissa) & Bits(F::kExponentMask));
  Bits mant = u & ((Bits(1) << F::kMantissa) - 1);
  // |x| = mant 2^kMinExponent (subnormal), (mant + 2^kMantissa) 2^(kMinExponent + field - 1) (normal).
  int shift = e + F::kMinExponent + (field ? field - 1 : 0);
  if (field) mant |= Bits(1) << F::kMantissa;
  if (shift >= 0) {
    shift = shift < 62 - F::kMantissa ? shift : 62 - F::kMantissa;
    return typename F::Magnitude(uint64_t(mant) << shift);
  }
  // mant < 2^(kMantissa + 1): at shift <= -(kMantissa + 2) the value is below 1/2.
  if (shift < -(F::kMantissa + 1)) return 0;
  const int s = -shift;  // 1 .. kMantissa + 1
  Bits q = mant >> s;
  const Bits rem = mant & ((Bits(1) << s) - 1), half = Bits(1) << (s - 1);
  q += (rem > half || (rem == half && (q & 1))) ? 1 : 0;
  return typename F::Magnitude(q);
}

// |q| mod m_l for |q| < 2^31: |q| = hi 2^16 + lo, hi < 2^15, and
// hi (2^16 mod m) + lo < 2^15 2^8 + 2^16 < 2^24 (one mod_u24).
__host__ __device__ __forceinline__ int magnitude_mod(uint32_t a, const ResidueProblem& p, int l) {
  return mod_u24((a >> 16) * uint32_t(p.c16[l]) + (a & 0xFFFFu), p.moduli[l], p.magic[l]);
}
// |q| < 2^63: Horner's rule over 16-bit pieces, each step r 2^16 + piece
// reduced as r (2^16 mod m) + piece < 2^8 2^8 + 2^16 < 2^24.
__host__ __device__ __forceinline__ int magnitude_mod(uint64_t a, const ResidueProblem& p, int l) {
  const int m = p.moduli[l];
  const uint32_t magic = p.magic[l], c16 = uint32_t(p.c16[l]);
  int r = mod_u24(uint32_t(a >> 48), m, magic);
  r = mod_u24(uint32_t(r) * c16 + uint32_t((a >> 32) & 0xFFFFu), m, magic);
  r = mod_u24(uint32_t(r) * c16 + uint32_t((a >> 16) & 0xFFFFu), m, magic);
  return mod_u24(uint32_t(r) * c16 + uint32_t(a & 0xFFFFu), m, magic);
}

// The symmetric residue of q = (negative ? -1 : 1) |q| from r = |q| mod m:
// q mod m in [0, m), minus m where it is >= (m + 1) / 2.
__host__ __device__ __forceinline__ int symmetric_residue(int r, bool negative, int m) {
  if (negative && r) r = m - r;
  return r >= (m + 1) / 2 ? r - m : r;
}

template <int N>
__host__ __device__ __forceinline__ void store_bytes(int8_t* dst, const uint32_t (&w)[N / 4]) {
  static_assert(N == 4 || N == 16, "4 or 16 residues per store");
  if constexpr (N == 4) {
    *reinterpret_cast<uint32_t*>(dst) = w[0];
  } else {
    *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// N consecutive values of one GEMM row (k .. k + N - 1), scaled by 2^e: their
// residues for every modulus, stored at dst + l * plane (dst 4N-byte aligned).
//
// float (|q| <= 2^30): z = q + 2^30 in [0, 2^31] is split into 16-bit halves
// once per value; per modulus, y = z_hi (2^16 mod m) + z_lo + shift30 is
// congruent to q + h (h = floor(m / 2); shift30 = (h - 2^30) mod m) and
// below 2^15 * 255 + 2^16 + 256 < 2^24, so the symmetric residue is
// (y mod m) - h: (q + h) mod m - h lies in [-h, m - 1 - h], which is
// symmetric_residue's range and value. Two multiplications per remainder
// (mod_u24_direct) and no sign branch: the kernels had issued at 64-74 % of
// the multiprocessors' rate (ncu, H100), bound by this arithmetic.
template <class T, int N>
__host__ __device__ __forceinline__ void write_residues(const ResidueProblem& p, const T (&v)[N], int e, int8_t* dst,
                                                        int64_t plane) {
  typename FloatBits<T>::Magnitude mag[N];
  bool neg[N];
#pragma unroll
  for (int i = 0; i < N; ++i) mag[i] = scaled_magnitude(v[i], e, &neg[i]);
  uint32_t z_hi[N] = {}, z_lo[N] = {};  // float only
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const uint32_t z = neg[i] ? (1u << 30) - uint32_t(mag[i]) : (1u << 30) + uint32_t(mag[i]);
      z_hi[i] = z >> 16;
      z_lo[i] = z & 0xFFFFu;
    }
  }
  for (int l = 0; l < p.nmod; ++l, dst += plane) {
    uint32_t w[N / 4] = {};
#pragma unroll
    for (int i = 0; i < N; ++i) {
      int s;
      if constexpr (sizeof(T) == 4)
        s = mod_u24_direct(z_hi[i] * uint32_t(p.c16[l]) + z_lo[i] + uint32_t(p.shift30[l]), p.moduli[l], p.magic[l]) -
            p.half[l];
      else
        s = symmetric_residue(magnitude_mod(mag[i], p, l), neg[i], p.moduli[l]);
      w[i / 4] |= uint32_t(uint8_t(int8_t(s))) << (8 * (i % 4));
    }
    store_bytes<N>(dst, w);
  }
}

// Not transposed: task t of batch * rows_out * (k_out / 4) handles the 4
// values k0 .. k0 + 3 of one output row (row_id = b * rows_out + r). Adjacent
// tasks are adjacent in memory: a warp reads 512 contiguous bytes of float32
// and writes 128 contiguous bytes per modulus.
template <class T>
__host__ __device__ __forceinline__ void rows_task(const ResidueProblem& p, int64_t t) {
  int64_t row_id, group, b, r;
  divmod(t, p.k_out / 4, &row_id, &group);
  divmod(row_id, p.rows_out, &b, &r);
  const int64_t k0 = group * 4;
  T v[4] = {T(0), T(0), T(0), T(0)};
  int e = 0;
  if (r < p.rows && k0 < p.k) {
    e = p.exp[b * p.rows + r];
    const T* src = static_cast<const T*>(p.x) + (b * p.rows + r) * p.k + k0;
#ifdef __CUDA_ARCH__
    // k a multiple of 4 (and x 16-byte aligned): whole 16-byte pieces.
    if (k0 + 4 <= p.k && (p.k & 3) == 0 && (reinterpret_cast<uintptr_t>(p.x) & 15) == 0) {
      if constexpr (sizeof(T) == 4) {
        const float4 q = __ldg(reinterpret_cast<const float4*>(src));
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
      } else {
        const double2 q0 = __ldg(reinterpret_cast<const double2*>(src));
        const double2 q1 = __ldg(reinterpret_cast<const double2*>(src) + 1);
        v[0] = q0.x, v[1] = q0.y, v[2] = q1.x, v[3] = q1.y;
      }
    } else
#endif
    {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (k0 + j < p.k) v[j] = src[j];
    }
  }
  write_residues<T, 4>(p, v, e, p.out + row_id * p.k_out + k0, p.batch * p.rows_out * p.k_out);
}

// Transposed (x is (batch, k, rows)): the 16 values k0 .. k0 + 15 of output
// row r, read as col[j * stride] for j < valid (0 beyond: padding). The
// device kernel passes a column of its shared-memory tile, the host test
// the operand itself.
template <class T>
__host__ __device__ __forceinline__ void transposed_task(const ResidueProblem& p, int64_t b, int64_t r, int64_t k0,
                                                         const T* col, int64_t stride, int valid) {
  T v[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) v[j] = j < valid ? col[j * stride] : T(0);
  const int e = r < p.rows ? p.exp[b * p.rows + r] : 0;
  write_residues<T, 16>(p, v, e, p.out + (b * p.rows_out + r) * p.k_out + k0, p.batch * p.rows_out * p.k_out);
}

}  // namespace int8
}  // namespace jaxemu
