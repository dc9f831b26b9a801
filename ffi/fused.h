// jaxemu fused emulation GEMM: host interface (see fused/params.h for the problem).
#pragma once

#include <string>

#include <cuda_runtime.h>

#include "common/gate.h"
#include "fused/params.h"

namespace jaxemu {
namespace fused {

// K-steps per tile of the kernels for a slice type: one 128-byte row of
// slices. Promotion intervals are whole tiles; K must be a multiple of it
// (the caller zero-pads), as the slices are laid out tile by tile (params.h).
int tile_k(SliceType t);
int k_align(SliceType t);  // == tile_k(t)

// "" when the problem can run (a kernel configuration exists for its slice
// type, slice count, term weights and tile width: fused/generate.py), else why not.
std::string check(SliceType t, const Problem& p);

// Launches on `stream` (no host synchronisation); "" or an error message.
// `gate` (common/gate.h): closed, the launch writes nothing (C keeps what
// it held). A kernel argument of its own, not a Problem member: a larger
// parameter struct changed ptxas's register allocation (the split kernels:
// 117 -> 178 registers, sm_90a, stop 59).
std::string run(SliceType t, const Problem& p, cudaStream_t stream, Gate gate = {});

// After run() of a Problem without K-splits: FP32's special values in C.
// Unless max |A| max |B| k < 2^100 (amax: the two maxima, float32, on the
// device; NaN and Inf fail it), every value of C that is not finite
// becomes the FP32 dot product of its row of a and column of b, the
// operands in float32: a (L, M, k), b (L, k, N) or, with b_rows, B^T
// (L, N, k); k the product's own K (the slices' is padded). A launch that
// returns at once when the test passes: no conditional on the host.
std::string fixup_special(const Problem& p, const float* a, const float* b, int64_t k, bool b_rows,
                          const float* amax, cudaStream_t stream, Gate gate = {});

// The operand split (fused/params.h: SplitProblem): "" when it can run,
// else why not; launches on `stream`.
std::string check(const SplitProblem& p);
std::string run(const SplitProblem& p, cudaStream_t stream, Gate gate = {});  // (gate: as the GEMM's)

// The kernels that read FP32 operands and split them in shared memory
// (fused/params.h: SplitF32; bf16 slices): p.a, p.b float32 (L, M, K) and
// (L, K, N), promotion intervals in K-tiles of kF32TileK. "" when a kernel
// exists for p's slice counts and terms and p can run, else why not.
constexpr int kF32TileK = 32;
std::string check_f32(const Problem& p, const SplitProblem& cut, const SplitF32& f32);
std::string run_f32(const Problem& p, const SplitProblem& cut, const SplitF32& f32, cudaStream_t stream);

}  // namespace fused

// Whether `device` can run the kernels (compute capability 9.0); else why not.
bool device_supported(int device, std::string* why);

}  // namespace jaxemu
