// jaxemu fused emulation GEMM: host interface (see fused/params.h for the problem).
#pragma once

#include <string>

#include <cuda_runtime.h>

#include "fused/params.h"

namespace jaxemu {
namespace fused {

// K-steps per tile of the kernels for a slice type (promotion intervals are
// whole tiles; the caller pads K to a multiple of kKAlign(t)).
int tile_k(SliceType t);
// K must be a multiple of this (TMA needs 16-byte row strides).
int k_align(SliceType t);

// "" when the problem can run, else why not.
std::string check(SliceType t, const Problem& p);

// Launches on `stream` (no host synchronisation); "" or an error message.
// The caller zeroes *p.nonfinite first.
std::string run(SliceType t, const Problem& p, cudaStream_t stream);

}  // namespace fused
}  // namespace jaxemu
