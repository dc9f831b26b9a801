// Every float32 through the FP32-operand kernel's tf32 rounding
// (ffi/fused/transform.cuh: Transform::tf32_rn, cvt.rn.tf32.f32) against
// split.cuh's round_bits(x, 10), the split kernel's and the xla backend's
// rule, on the GPU: the same bits for every value except NaN (payloads) and
// |x| within half a tf32 step of float's largest (the instruction rounds
// to Inf, round_bits truncates), which must give Inf; every NaN must give
// a value that is not finite (NaN; the low 13 bits masked, a NaN whose
// payload lies only there would become Inf: counted, allowed, as either
// makes C's entries not finite and the fix-up gives FP32's value) and Inf
// itself, sign kept. Prints the counts; exit status 1 on any other difference.
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -Iffi -I.cutlass/include \
//     tests/native/tf32_round_check.cu -o /tmp/tf32_round_check && /tmp/tf32_round_check
#include <cstdio>

#include "fused/traits_f32.cuh"
#include "fused/transform.cuh"

using T = jaxemu::fused::TraitsF32<cutlass::tfloat32_t, 2, 2, 3>;

__global__ void compare(unsigned long long* counts) {
  unsigned long long other = 0, edge = 0, bad_edge = 0, nan_inf = 0, nan_finite = 0, bad_inf = 0;
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += gridDim.x * blockDim.x) {
    const float x = __uint_as_float(uint32_t(i));
    const float got = jaxemu::fused::Transform<T>::tf32_rn(x);
    if (isnan(x)) {
      nan_inf += isinf(got);
      nan_finite += isfinite(got);
      continue;
    }
    if (isinf(x)) bad_inf += __float_as_uint(got) != uint32_t(i);
    const float want = jaxemu::fused::round_bits(x, 10);
    if (__float_as_uint(got) == __float_as_uint(want)) continue;
    if ((uint32_t(i) & 0x7FFFFFFFu) >= 0x7F7FF000u && !isinf(x)) {
      ++edge;
      bad_edge += !isinf(got);
    } else {
      ++other;
    }
  }
  atomicAdd(counts, other);
  atomicAdd(counts + 1, edge);
  atomicAdd(counts + 2, bad_edge);
  atomicAdd(counts + 3, nan_inf);
  atomicAdd(counts + 4, nan_finite);
  atomicAdd(counts + 5, bad_inf);
}

int main() {
  unsigned long long* d;
  unsigned long long h[6];
  cudaMalloc(&d, sizeof h);
  cudaMemset(d, 0, sizeof h);
  compare<<<1024, 256>>>(d);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  const cudaError_t e = cudaGetLastError();
  std::printf("tf32_rn against round_bits, every non-NaN float: %llu differ (must be 0); %llu near float's largest "
              "give Inf (%llu do not: must be 0); NaNs: %llu give Inf, %llu a finite value (must be 0); "
              "Infs changed: %llu (must be 0)%s%s\n", h[0], h[1], h[2], h[3], h[4], h[5],
              e ? "; CUDA error: " : "", e ? cudaGetErrorString(e) : "");
  return (e != cudaSuccess || h[0] != 0 || h[2] != 0 || h[4] != 0 || h[5] != 0) ? 1 : 0;
}
