// jaxemu fused emulation GEMM: the problem description shared by host and device.
//
// One launch computes a whole emulated product C = sum_t 2^e_t * A_{a_t} @ B_{b_t}^T
// over the scheme's slice products ("terms") t, for a batch of L problems:
//   A slices: (L, M, K / TK, S, TK) in the slice format: for each row and
//             K-tile of TK elements (128 bytes), the S slices side by side, so
//             that one elementwise XLA fusion writes them reading A once
//   B slices: (L, N, K / TK, S, TK) likewise (B stored transposed: "TN")
//   K is a multiple of TK (64 for 16-bit slices, 32 for tf32; zero-padded).
//   C:        (splits, L, M, N) float32 row-major; splits == 1 writes the product,
//             splits > 1 writes one partial sum per K-split (the caller adds them).
// Each pipeline stage holds every slice of A and B for one K-tile, and every
// term reads its slices from it, smallest terms first (mainloop.cuh). Terms of
// equal weight share one partial accumulator (bf16 and tf32 slices are
// unscaled: all terms; fp16's scaled lo slices: hi*hi in one, the corrections
// in another), which leaves the tensor cores' accumulator every `kc_tiles`
// K-tiles and is added, times its weight, to an FP32 accumulator with a
// round-to-nearest add: Hopper's tensor cores do not accumulate in round-to-
// nearest (DESIGN.md 2.1), so this promotion is what keeps FP32 accuracy at large K.
#pragma once

#include <cstdint>
#include <string>

namespace jaxemu {
namespace fused {

constexpr int kMaxTerms = 9;  // bf16x9: every pair of three slices

enum class SliceType { kBF16, kFP16, kTF32 };

struct Problem {
  const void* a = nullptr;       // (L, M, K / TK, S, TK)
  const void* b = nullptr;       // (L, N, K / TK, S, TK)
  float* c = nullptr;            // (splits, L, M, N)
  const int32_t* row_exp = nullptr;  // (L, M) or null: C[l, m, n] *= 2^-(row_exp[l, m] + col_exp[l, n])
  const int32_t* col_exp = nullptr;  // (L, N) or null (both or neither)
  // fp16's exponents found in the FP32-operand kernel instead (row_exp and
  // col_exp null; the kernels with kExpsInKernel, transform.cuh:
  // choose_rows): each work item takes a row's (column's) from the maximum
  // of its first K-tile that is nonzero there, exp_headroom binades below
  // row_exp's rule, and writes them here for its epilogue: (splits, L, M)
  // of rows, then (splits, L, N) of columns.
  int32_t* item_exp = nullptr;
  int exp_headroom = 0;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int sa = 1, sb = 1;            // slices per operand (equal: the kernel's stage holds S of each)
  int splits = 1;                // K-splits (deterministic: one partial each)
  int tile_n = 128;              // tile width chosen by the caller (128 or 192)
  int nterms = 0;                // terms in the order the tensor cores add them (smallest first)
  int term_a[kMaxTerms] = {};    // slice of A in term t
  int term_b[kMaxTerms] = {};    // slice of B in term t
  int term_exp[kMaxTerms] = {};  // the term's weight 2^e_t (exact)
  int kc_tiles[kMaxTerms] = {};  // promotion interval of term t, in K-tiles (>= 1)
  // Group 0's promotions per K-tile (1, or 2 where its interval is one
  // K-tile): an interval of half a K-tile, for short K, where the tensor
  // cores' truncation of hi*hi's partial is most of the error
  // (jaxemu/backends/cuda_fused.py: kernel_kc). The slice kernels built
  // for it (traits.cuh: kHalfTile; fp16 and tf32 with fixed term counts
  // at 128-wide tiles, ffi/fused/generate.py); the FP32-operand kernel
  // takes 1 only. (A quarter K-tile cost the fp16 kernel 64 more bytes of
  // spills: not offered.)
  int kc_sub = 1;
};

// How the kernel runs a Problem's terms: terms of equal weight share a
// partial accumulator ("group"); group 0 holds the largest weight (hi*hi),
// group 1 (fp16's corrections, when there are two weights) the other, and
// its terms come first in the order (smallest first). A group promotes every
// kc_tiles K-tiles, the least of its terms' intervals (aligned from K = 0);
// group 1's interval is a multiple of group 0's, so that it promotes where
// group 0 does. (Within a chunk of several K-tiles, the small terms of the
// second and later K-tiles add into a partial that already holds hi*hi, so
// their truncation is at hi*hi's scale: an interval of one K-tile keeps
// every term's as when each had its own accumulator; jaxemu/schemes.py's
// kc says what longer intervals cost.) At most two groups (register budget: the total and two
// partials are 3 x 64 floats per consumer thread at 128-wide tiles).
constexpr int kMaxGroups = 2;
struct TermPlan {
  int ngroups = 1;
  int n1 = 0;                    // group 1's terms: the first n1 of the order
  int exp[kMaxGroups] = {};      // the group's weight 2^exp
  int kc_tiles[kMaxGroups] = {};
  int sub0 = 1;                  // group 0's promotions per K-tile (Problem::kc_sub)
};

// The plan of p's terms into `plan`; "" or why the kernel cannot run them
// (more than kMaxGroups distinct weights, or the smaller weight not first).
inline std::string plan_terms(const Problem& p, TermPlan* plan) {
  TermPlan t;
  int top = p.term_exp[0];
  for (int i = 1; i < p.nterms; ++i) top = p.term_exp[i] > top ? p.term_exp[i] : top;
  t.exp[0] = t.exp[1] = top;
  t.kc_tiles[0] = t.kc_tiles[1] = 1 << 30;
  for (int i = 0; i < p.nterms; ++i) {
    const int g = p.term_exp[i] == top ? 0 : 1;
    if (g == 1) {
      if (t.n1 != i) return "the terms of the smaller weight must come first";
      if (t.n1 > 0 && p.term_exp[i] != t.exp[1])
        return "more than " + std::to_string(kMaxGroups) + " distinct term weights";
      t.exp[1] = p.term_exp[i];
      t.n1 = i + 1;
      t.ngroups = 2;
    }
    t.kc_tiles[g] = p.kc_tiles[i] < t.kc_tiles[g] ? p.kc_tiles[i] : t.kc_tiles[g];
  }
  // Group 1's interval: a multiple of group 0's. Where it asks for less,
  // group 0 promotes that often too (more often than asked, never less).
  if (t.ngroups == 2 && t.kc_tiles[1] < t.kc_tiles[0]) t.kc_tiles[0] = t.kc_tiles[1];
  const int k0 = t.kc_tiles[0];
  t.kc_tiles[1] = t.ngroups == 1 ? k0 : t.kc_tiles[1] / k0 * k0;
  if (p.kc_sub != 1 && p.kc_sub != 2) return "kc_sub must be 1 or 2";
  if (p.kc_sub > 1 && k0 != 1) return "promotions within a K-tile need group 0's interval to be one K-tile";
  t.sub0 = p.kc_sub;
  *plan = t;
  return "";
}

// The kernels that read FP32 operands and split them in shared memory
// (traits_f32.cuh): a and b of the Problem are float32, A (L, M, K) and B
// (L, K, N) row-major (no padding: TMA fills K past the end with zeros; K and
// N multiples of 4 for TMA's 16-byte strides). Each value is cut as a
// SplitProblem says (its type, slices, lo_scale_bits, truncate: split.cuh's
// slice_of, the same slices bit for bit as the split kernel's). C's
// special values (kernel_f32.cuh): every entry whose emulated value is not
// finite is recomputed with FP32 arithmetic by a kernel that reads `flags`
// on the device and returns at once when no tile raised it, so that FP32's
// NaN/Inf pattern and FP32's own value where the emulation overflowed are
// the result, with no conditional on the host and no pass over C otherwise.
struct SplitF32 {
  float* partials = nullptr;  // (splits, L, M, N) when splits > 1, else unused
  int32_t* flags = nullptr;   // one int32, zeroed by the launch: C holds a value that is not finite
  bool register_a = false;    // A's slices in registers (traits_f32.cuh: kRegisterA), else in shared memory
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
  // Or null: fp16's row exponents (batch, rows) found by the split itself,
  // from each row's largest finite |x| (split_rows_exp_kernel, ffi/
  // fused_dispatch.cu: rows of up to kSplitExpBlockMaxK values, not
  // transposed, exp null), and written here for the GEMM's unscaling.
  int32_t* exp_out = nullptr;
  // Or null: with exp_out only, auto's row statistics of x (ffi/stats/
  // params.h: the row kernel's, the same rules) from the same read of each
  // row, instead of a second pass over x (the statistics kernel's):
  // stats_out (n, batch, rows) float32, statistic s of row b * rows + r at
  // stats_out[s * batch * rows + b * rows + r]; n = 8 with a probe (batch,
  // k) float32, finite, row stride k (stats_probe; null only where k is 0),
  // n = 4 (the extremes) without (stats_probe false, probe null).
  const float* probe = nullptr;
  float* stats_out = nullptr;
  bool stats_probe = false;
};
constexpr int kMaxSlices = 4;  // FloatSplit's limit (jaxemu/schemes.py)
constexpr int kSplitExpMaxK = 2048;  // k_out of a row split with its exponent found (a warp's registers)
// k_out of a row split with its exponent found by a block of 256 threads
// (split_rows_exp_block_kernel, for k_out past kSplitExpMaxK: 4 tasks of 8
// values per thread at most, 72 registers, 80 with the statistics, sm_90a,
// where a warp's lanes would hold 256 values each, past the register file's
// 255 per thread); longer rows take the exponents from a pass.
constexpr int kSplitExpBlockMaxK = 8192;

}  // namespace fused
}  // namespace jaxemu
