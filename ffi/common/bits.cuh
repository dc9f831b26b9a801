// Bit patterns of float and double on host and device (the operand kernels'
// exact arithmetic works on them: ffi/fused/split.cuh, ffi/int8/residues.cuh).
#pragma once

#include <cstdint>
#include <cstring>

#include <cuda_runtime.h>

namespace jaxemu {

__host__ __device__ __forceinline__ uint32_t bits_of(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

__host__ __device__ __forceinline__ uint64_t bits_of(double x) {
#ifdef __CUDA_ARCH__
  return uint64_t(__double_as_longlong(x));
#else
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

__host__ __device__ __forceinline__ float float_from_bits(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

}  // namespace jaxemu
