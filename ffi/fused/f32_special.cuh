// The FP32-operand kernels' special values (params.h: SplitF32): the
// GEMM raises a flag where an entry of C is not finite; after it, the split-K
// sum (which raises it too) and the fix-up that gives those entries their
// FP32 value (ffi/fused_dispatch.cu: finish_f32, one definition for every
// kernel configuration).
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "params.h"

namespace jaxemu {
namespace fused {

__device__ __forceinline__ bool not_finite(float x) { return (__float_as_uint(x) & 0x7F800000u) == 0x7F800000u; }

// Raise flags[0] when any lane of the warp saw a value that is not finite.
__device__ __forceinline__ void raise_if(bool bad, int32_t* flags) {
  if (__any_sync(0xffffffffu, bad) && threadIdx.x % 32 == 0) atomicOr(flags, 1);
}

// After the GEMM (ffi/fused_dispatch.cu, one definition for every
// configuration): the K-splits' partials summed into C when there are
// K-splits, then the special-value fix-up, except where the kernel found
// fp16's exponents itself (Problem::item_exp): there the raised flag is the
// caller's to act on (a redo with the pass's exponents). "" or the launch
// error.
std::string finish_f32(const Problem& p, const SplitF32& f32, int sms, cudaStream_t stream);

}  // namespace fused
}  // namespace jaxemu
