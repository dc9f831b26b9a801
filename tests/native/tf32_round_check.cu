// Every float32 through the FP32-operand kernel's tf32 rounding
// (ffi/fused/transform.cuh: Transform::tf32_rn, cvt.rn.tf32.f32) against
// split.cuh's round_bits(x, 10), the split kernel's and the xla backend's
// rule, on the GPU: the same bits for every value except NaN (payloads) and
// |x| within half a tf32 step of float's largest (the instruction rounds
// to Inf, round_bits truncates), which must give Inf. Prints the counts;
// exit status 1 on any other difference.
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -Iffi -I.cutlass/include \
//     tests/native/tf32_round_check.cu -o /tmp/tf32_round_check && /tmp/tf32_round_check
#include <cstdio>

#include "fused/traits_f32.cuh"
#include "fused/transform.cuh"

using T = jaxemu::fused::TraitsF32<cutlass::tfloat32_t, 2, 2, 3>;

__global__ void compare(unsigned long long* counts) {
  unsigned long long other = 0, edge = 0, bad_edge = 0;
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += gridDim.x * blockDim.x) {
    const float x = __uint_as_float(uint32_t(i));
    if (isnan(x)) continue;
    const float got = jaxemu::fused::Transform<T>::tf32_rn(x), want = jaxemu::fused::round_bits(x, 10);
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
}

int main() {
  unsigned long long* d;
  cudaMalloc(&d, 3 * sizeof(unsigned long long));
  cudaMemset(d, 0, 3 * sizeof(unsigned long long));
  compare<<<1024, 256>>>(d);
  unsigned long long h[3];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  const cudaError_t e = cudaGetLastError();
  std::printf("tf32_rn against round_bits, every non-NaN float: %llu differ (must be 0); %llu near float's largest "
              "give Inf (%llu do not: must be 0)%s%s\n", h[0], h[1], h[2], e ? "; CUDA error: " : "",
              e ? cudaGetErrorString(e) : "");
  return (e != cudaSuccess || h[0] != 0 || h[2] != 0) ? 1 : 0;
}
