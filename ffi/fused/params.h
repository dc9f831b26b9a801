// jaxemu fused emulation GEMM: the problem description shared by host and device.
//
// One launch computes a whole emulated product C = sum_t 2^e_t * A_{a_t} @ B_{b_t}^T
// over the scheme's slice products ("terms") t, for a batch of L problems:
//   A slices: (L, M, K / TK, Sa, TK) in the slice format: for each row and
//             K-tile of TK elements (128 bytes), the Sa slices side by side, so
//             that one elementwise XLA fusion writes them reading A once
//   B slices: (L, N, K / TK, Sb, TK) likewise (B stored transposed: "TN")
//   K is a multiple of TK (64 for 16-bit slices, 32 for tf32; zero-padded).
//   C:        (splits, L, M, N) float32 row-major; splits == 1 writes the product,
//             splits > 1 writes one partial sum per K-split (the caller adds them).
// Partial sums leave the tensor cores' accumulator every `kc_tiles[t]` K-tiles
// (each term separately) and are added, times 2^e_t, to an FP32 accumulator with
// round-to-nearest adds: Hopper's tensor cores do not accumulate in round-to-
// nearest (DESIGN.md 2.1), so this promotion is what keeps FP32 accuracy at large K.
#pragma once

#include <cstdint>

namespace jaxemu {
namespace fused {

constexpr int kMaxTerms = 9;  // bf16x9: every pair of three slices

enum class SliceType { kBF16, kFP16, kTF32 };

struct Problem {
  const void* a = nullptr;       // (L, M, K / TK, Sa, TK)
  const void* b = nullptr;       // (L, N, K / TK, Sb, TK)
  float* c = nullptr;            // (splits, L, M, N)
  int* nonfinite = nullptr;      // set to 1 when an output is NaN/Inf (caller zeroes it)
  const int32_t* row_exp = nullptr;  // (L, M) or null: C[l, m, n] *= 2^-(row_exp[l, m] + col_exp[l, n])
  const int32_t* col_exp = nullptr;  // (L, N) or null (both or neither)
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int sa = 1, sb = 1;            // slices per operand
  int splits = 1;                // K-splits (deterministic: one partial each)
  int tile_n = 128;              // tile width chosen by the caller (128 or 192)
  int nterms = 0;
  int term_a[kMaxTerms] = {};    // slice of A in term t
  int term_b[kMaxTerms] = {};    // slice of B in term t
  int term_exp[kMaxTerms] = {};  // the term's weight 2^e_t (exact)
  int kc_tiles[kMaxTerms] = {};  // promotion interval of term t, in K-tiles (>= 1)
};

// The split of one operand into the slices the kernel reads (split.cuh):
// x (batch, rows, k), or `transposed` (batch, k, rows) (B of A B, whose
// columns are the GEMM's rows), float32; exp (batch, rows) int32 or null:
// each row scaled by 2^exp first (fp16's row scaling). Every value becomes
// `slices` values of the slice type, s_i = round(r_i) with r_0 = x and
// r_{i+1} = (r_i - s_i) 2^lo_scale_bits, rounded to nearest even or, with
// `truncate` (bit-cut), toward zero, on the format's grid (fp16 subnormals
// included; bf16 and tf32 keep float32's exponent range, a finite value
// that would round past FLT_MAX is truncated instead): exactly
// jaxemu/backends/xla.py: split_float. out (batch, rows, k_out / TK,
// slices, TK) in the slice type (tf32 in float32 storage), zeros past k
// (k_out a multiple of TK). One read of x, one write of the slices.
struct SplitProblem {
  const float* x = nullptr;
  const int32_t* exp = nullptr;
  void* out = nullptr;
  int64_t batch = 0, rows = 0, k = 0, k_out = 0;
  bool transposed = false;
  SliceType type = SliceType::kBF16;
  int slices = 1;
  int lo_scale_bits = 0;
  bool truncate = false;
  int max_blocks = 0;  // > 0: at most this many blocks (tests: several tiles per block)
  // Or null: the largest |x| over the operand as float32 bits (sign cleared;
  // NaN's bits exceed Inf's, Inf's any finite value's), which the caller
  // zeroes first: x is all finite and bounded exactly when the bits say so
  // (jaxemu/backends/xla.py: product_fits).
  int32_t* amax_bits = nullptr;
};
constexpr int kMaxSlices = 4;  // FloatSplit's limit (jaxemu/schemes.py)

}  // namespace fused
}  // namespace jaxemu
