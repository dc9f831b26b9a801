// Division-free reductions modulo a small run-time modulus (2 <= m <= 256),
// shared by the Ozaki II residue and CRT kernels (host and device).
#pragma once

#include <cstdint>

#include "params.h"

namespace jaxemu {
namespace int8 {

// x mod m for 0 <= x < 2^24 and 2 <= m <= 256, without a division
// (magic = mod_magic(m), ffi/int8/tables.h):
// q = floor(x magic / 2^32) with magic = floor(2^32 / m) + 1 = (2^32 + e) / m,
// 0 < e <= m, is x / m plus x e / (m 2^32) < x / 2^32 < 2^-8 <= 1 / m, too
// little to reach the next integer: q = floor(x / m) exactly. (An integer
// division by a run-time divisor is ~20 instructions; this is a mul-hi and
// a multiply-add.) tests/native/crt_check.cu --selftest checks it for every
// such x and m.
__host__ __device__ __forceinline__ int mod_u24(uint32_t x, int m, uint32_t magic) {
#ifdef __CUDA_ARCH__
  const uint32_t q = __umulhi(x, magic);
#else
  const uint32_t q = uint32_t((uint64_t(x) * magic) >> 32);
#endif
  return int(x - q * uint32_t(m));
}

// The same remainder from two multiplications instead of three operations
// (Lemire, Kaser & Kurz 2019, "Faster remainder by direct computation"):
// frac = x magic mod 2^32 is the fractional part of x / m in 32-bit fixed
// point, low by less than x e / 2^32 < 2^-8 <= 1 / m (as in mod_u24), so
// floor(frac m / 2^32) is x mod m. tests/native/crt_check.cu --selftest
// checks it for every x < 2^24 and m.
__host__ __device__ __forceinline__ int mod_u24_direct(uint32_t x, int m, uint32_t magic) {
  const uint32_t frac = x * magic;
#ifdef __CUDA_ARCH__
  return int(__umulhi(frac, uint32_t(m)));
#else
  return int((uint64_t(frac) * uint32_t(m)) >> 32);
#endif
}

// x mod m in [0, m) for any int32 x: x + 2^31 = (hi + 2^15) 2^16 + lo, both
// parts nonnegative, and (hi + 2^15) (2^16 mod m) + lo < 2^16 * 256 = 2^24;
// c16 = 2^16 mod m and c31 = 2^31 mod m take the offset back out.
__host__ __device__ __forceinline__ int mod_i32(int32_t x, int m, uint32_t magic, int c16, int c31) {
  const uint32_t hi = uint32_t((x >> 16) + 32768), lo = uint32_t(x) & 0xFFFFu;
  const int r = mod_u24(hi * uint32_t(c16) + lo, m, magic) - c31;
  return r < 0 ? r + m : r;
}

__host__ __device__ __forceinline__ int mod_i32(int32_t x, const Modulus& q) {
  return mod_i32(x, q.m, q.magic, q.c16, q.c31);
}

}  // namespace int8
}  // namespace jaxemu
