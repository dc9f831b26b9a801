// jaxemu int8 kernels: the problems shared by host and device (ffi/int8.h).
//
// Ozaki scheme II (jaxemu/_ozaki2.py, docs/accuracy.md) computes an FP32 (or
// FP64) product from exact integer products of int8 residues, one per
// modulus m_l, and the Chinese remainder theorem. Its GPU path, after XLA's
// row / column maxima (the scaling exponents), is four launches:
//   0. ResidueProblem, once per operand: the scaled integers' int8 residues
//      modulo every m_l, in the GEMM's layout (K contiguous, zero-padded),
//      one read of the operand;
//   1. GemmProblem: every residue product of one emulated product in one
//      batched int8 x int8 -> int32 tensor-core GEMM (L = moduli x batch);
//   2. CrtProblem: per output element, the residues of the raw products, the
//      mixed-radix (Garner) digits, their value scaled back to FP32: one pass
//      over the int32 products, C written once.
#pragma once

#include <cstdint>

namespace jaxemu {
namespace int8 {

// C[l] = A[l] B[l]^T, exact in int32: A (batch, m, k) and B (batch, n, k)
// int8 with k contiguous (int8 wgmma reads only K-major shared memory, so B
// comes transposed: "TN"), C (batch, m, n) int32 with n contiguous.
// |a|, |b| <= 128, so each term is at most 2^14 in magnitude and the int32
// accumulator is exact for k <= kMaxExactK terms (k 2^14 < 2^31).
//
// Or, for Ozaki II, only what its reconstruction reads: with r instead of c,
// r[l] = (A[l] B[l]^T) mod m (in [0, m), uint8) for the modulus m =
// moduli[l / (batch / nmod)] (l = modulus * batch + b), reduced in the GEMM's
// epilogue from the exact int32 sums: a quarter of the bytes written, and a
// quarter of what the CRT kernel reads (ffi/int8/epilogue.cuh).
constexpr int kMaxModuli = 20;
// x mod m without a division (modular.cuh: mod_i32): magic = floor(2^32 / m)
// + 1, c16 = 2^16 mod m, c31 = 2^31 mod m.
struct Modulus {
  int m = 0;
  uint32_t magic = 0;
  int c16 = 0, c31 = 0;
};
struct GemmProblem {
  const int8_t* a = nullptr;
  const int8_t* b = nullptr;
  int32_t* c = nullptr;
  uint8_t* r = nullptr;
  int64_t batch = 0, m = 0, n = 0, k = 0;
  int nmod = 0;             // r only: > 0
  Modulus moduli[kMaxModuli] = {};
  bool residues() const { return nmod > 0; }  // the output is r
};
constexpr int64_t kMaxExactK = (int64_t(1) << 17) - 1;
// TMA needs 16-byte row strides: k a multiple of 16 (int8), n of 4 (int32 c)
// or 16 (uint8 r); the caller zero-pads.
constexpr int64_t kAlignK = 16;
constexpr int64_t kAlignN = 4;
constexpr int64_t kAlignNResidues = 16;

// Kernel configurations (ffi/int8/inst/): a wide tile with 2x1 clusters for
// outputs that fill the GPU, a 128 x 128 stream-K one for small outputs with
// a long K (integer sums are associative: any K split is bit-identical).
enum class GemmConfig { kWide, kStreamK };

// The CRT of one Ozaki II product: p (nmod, batch, m, n) int32 raw residue
// products (any int32: reduced mod m_l here), or r (nmod, batch, m, n) uint8
// the products already reduced (GemmProblem::r), row_exp (batch, m) and col_exp
// (batch, n) the power-of-two scalings of A's rows and B's columns;
// c (batch, m, n) float32 = sum_l v_l W_l * 2^-(row_exp + col_exp) with the
// balanced Garner digits v_l (W_l = m_0 ... m_{l-1}), summed in double
// (relative error ~nmod 2^-53, far below FP32's rounding) and rounded once to
// float32 (overflow gives Inf, which the caller replaces by FP32's value).
// With c64 instead of c, C is float64 (ozaki2_f64): C' summed exactly
// (192-bit integers) and rounded once, subnormals included.
struct CrtProblem {
  const int32_t* p = nullptr;
  const uint8_t* r = nullptr;
  const int32_t* row_exp = nullptr;
  const int32_t* col_exp = nullptr;
  float* c = nullptr;
  double* c64 = nullptr;
  int64_t batch = 0, m = 0, n = 0;
  int nmod = 0;
  int moduli[kMaxModuli] = {};
  int inverse[kMaxModuli] = {};                // (W_l mod m_l)^-1 mod m_l (1 for l = 0)
  int wmod[kMaxModuli][kMaxModuli] = {};       // W_j mod m_l for j < l
  double weight[kMaxModuli] = {};              // W_l (rounded to double: relative 2^-53)
  // Division-free reductions (crt.cuh: mod_u24): magic = floor(2^32 / m) + 1,
  // c16 = 2^16 mod m, c31 = 2^31 mod m, off20 = the least multiple of m >= 2^20.
  uint32_t magic[kMaxModuli] = {};
  int c16[kMaxModuli] = {};
  int c31[kMaxModuli] = {};
  int off20[kMaxModuli] = {};
};

// The residues of one operand. x holds float32 or float64 values, finite:
// (batch, rows, k) with k contiguous, or, `transposed`, (batch, k, rows) with
// rows contiguous (B of A B, whose columns are the GEMM's rows). Each value
// is scaled by 2^exp[b, row] and rounded to the nearest integer q (ties to
// even, exactly: integer arithmetic on the bits, subnormals included); the
// caller chooses exp so that |q| <= 2^30 for float32 and 2^62 for float64.
// out (nmod, batch, rows_out, k_out) int8, k contiguous, holds the
// symmetric residues of q modulo each m_l: r = q mod m in [0, m), minus m
// where r >= (m + 1) / 2 ([-128, 127] for m = 256, [-(m-1)/2, (m-1)/2] for
// odd m; as jaxemu/_ozaki2.py: symmetric_residues); entries
// past rows or k (padding up to rows_out >= rows and k_out >= k, k_out a
// multiple of 16) are 0. One read of x, nmod int8 writes per value.
constexpr int kMaxResidueModuli = 40;
struct ResidueProblem {
  const void* x = nullptr;
  const int32_t* exp = nullptr;
  int8_t* out = nullptr;
  int64_t batch = 0, rows = 0, k = 0, rows_out = 0, k_out = 0;
  bool transposed = false;
  bool f64 = false;
  int nmod = 0;
  int moduli[kMaxResidueModuli] = {};
  uint32_t magic[kMaxResidueModuli] = {};  // modular.cuh: mod_u24
  int c16[kMaxResidueModuli] = {};         // 2^16 mod m
  int half[kMaxResidueModuli] = {};        // floor(m / 2)
  int shift30[kMaxResidueModuli] = {};     // (half - 2^30) mod m (residues.cuh: float operands)
  int max_blocks = 0;  // > 0: at most this many blocks (tests: several tiles per block)
};

}  // namespace int8
}  // namespace jaxemu
