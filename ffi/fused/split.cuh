// The fused path's operand split (params.h: SplitProblem): each float32 value
// becomes its slices in the slice format, written tile by tile in the layout
// the GEMM kernel's TMA loads read. This header holds what one thread
// computes, for host and device (tests/native/split_check.cu runs it on the
// CPU against the xla backend's split_float); the kernels that stage the
// reads are in ffi/fused_dispatch.cu.
//
// Why a kernel: XLA's split ran as 2-3 fusions per operand on the k-means
// shapes and transposed B (K = 2^20, N = 256) at 35 % of DRAM bandwidth:
// ~10 ms of the k-means update's 23 ms on an H200 (docs/performance.md).
// Here each operand is read once and its slices written once, coalesced.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../common/bits.cuh"
#include "../common/tiles.cuh"
#include "params.h"

namespace jaxemu {
namespace fused {

// A slice tile's K (32 tf32 values, 64 of the 16-bit formats) as its log2:
// the split's index arithmetic shifts by it (a 64-bit division by a K known
// only at run time cost the split ~22 instructions per row: 410 M -> 387 M
// at 2^20 x 256, H200 ncu, stop 56).
__host__ __device__ __forceinline__ int split_tile_k_log2(SliceType t) { return t == SliceType::kTF32 ? 5 : 6; }
__host__ __device__ __forceinline__ int split_tile_k(SliceType t) { return 1 << split_tile_k_log2(t); }

__host__ __device__ __forceinline__ bool is_nan(float x) { return (bits_of(x) & 0x7FFFFFFFu) > 0x7F800000u; }
__host__ __device__ __forceinline__ bool is_inf(float x) { return (bits_of(x) & 0x7FFFFFFFu) == 0x7F800000u; }

// 2^e for e in [-126, 127], from the bits (xla.py: pow2).
__host__ __device__ __forceinline__ float pow2f(int e) { return float_from_bits(uint32_t(e + 127) << 23); }

__host__ __device__ __forceinline__ int floor_div(int a, int b) {  // b > 0, as Python's //
  const int q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// x 2^e in three power-of-two multiplications of the same sign, in the
// order xla.py's ldexp uses (so the same roundings where the result is
// subnormal): no intermediate over- or underflow unless the result's.
__host__ __device__ __forceinline__ float scale_pow2(float x, int e) {
  const int e1 = floor_div(e, 3), e2 = floor_div(e - e1, 2), e3 = e - e1 - e2;
  return x * pow2f(e1) * pow2f(e2) * pow2f(e3);
}

// Toward zero to `mant` explicit mantissa bits (xla.py: truncate_bits).
__host__ __device__ __forceinline__ float truncate_bits(float x, int mant) {
  return float_from_bits(bits_of(x) & (0xFFFFFFFFu << (23 - mant)));
}

// To nearest, ties to even, to `mant` mantissa bits in float32's exponent
// range (lax.reduce_precision(x, 8, mant); NaN stays NaN); a finite value
// that would round to Inf is truncated instead (xla.py: round_bits).
__host__ __device__ __forceinline__ float round_bits(float x, int mant) {
  if (is_nan(x)) return x;
  const uint32_t u = bits_of(x), shift = uint32_t(23 - mant);
  const uint32_t bias = ((1u << shift) >> 1) - 1 + ((u >> shift) & 1u);
  const float r = float_from_bits((u + bias) & (0xFFFFFFFFu << shift));
  return (is_inf(r) && !is_inf(x)) ? truncate_bits(x, mant) : r;
}

// |x| as float32 bits, sign cleared: as integers these order every finite
// value below Inf and Inf below NaN (the split's amax_bits).
__host__ __device__ __forceinline__ uint32_t abs_bits(float x) { return bits_of(x) & 0x7FFFFFFFu; }

// Below these |x| (as abs_bits) the device's conversions round as the bit
// code does: fp16 below 65520, which it cannot overflow; bf16 to nearest
// below the midpoint between its largest finite value and 2^128, where it
// cannot round to Inf. NaN and Inf lie above both.
constexpr uint32_t kFP16HardwareBits = 0x477FF000u;  // 65520
constexpr uint32_t kBF16HardwareBits = 0x7F7F8000u;

// The fp16 grid value of x (|x| < 65504 after row scaling), subnormals
// included: to nearest even or toward zero (xla.py: to_fp16_grid).
// On the device, the hardware conversion rounds onto the same grid (to
// nearest even or toward zero, subnormals included) in one instruction for
// every |x| < 65520, which it cannot overflow; the bit code, which the host
// runs, takes the rest (NaN, Inf, and finite values past fp16's range).
// tests/native/kernel_check's split cases hold the two to the same bits.
__host__ __device__ __forceinline__ float fp16_grid(float x, bool truncate) {
#ifdef __CUDA_ARCH__
  if (abs_bits(x) < kFP16HardwareBits)
    return __half2float(truncate ? __float2half_rz(x) : __float2half_rn(x));
#endif
  if ((bits_of(x) & 0x7FFFFFFFu) < 0x38800000u) {  // |x| < 2^-14 (zeros too): the 2^-24 grid
    const float scaled = x * 16777216.0f;              // 2^24, exact
    return (truncate ? truncf(scaled) : rintf(scaled)) * 5.9604644775390625e-8f;  // 2^-24
  }
  return truncate ? truncate_bits(x, 10) : round_bits(x, 10);
}

// One slice of a residual r: rounded onto the format's grid.
__host__ __device__ __forceinline__ float slice_of(const SplitProblem& p, float r) {
  if (p.type == SliceType::kFP16) return fp16_grid(r, p.truncate);
  const int mant = p.type == SliceType::kBF16 ? 7 : 10;
#ifdef __CUDA_ARCH__
  // bf16 to nearest even in hardware where it cannot round to Inf (|r| below
  // the midpoint between bf16's largest finite value and 2^128): the same
  // bits as round_bits (see fp16_grid).
  if (p.type == SliceType::kBF16 && !p.truncate && abs_bits(r) < kBF16HardwareBits)
    return __bfloat162float(__float2bfloat16_rn(r));
#endif
  return p.truncate ? truncate_bits(r, mant) : round_bits(r, mant);
}

// A slice value in its storage format: bf16 keeps the top 16 bits (exact:
// the value has 7 mantissa bits), fp16 converts (exact: the value is on the
// fp16 grid), tf32 stays a float.
__host__ __device__ __forceinline__ uint32_t storage_bits(SliceType t, float v) {
  if (t == SliceType::kBF16) return bits_of(v) >> 16;
  if (t == SliceType::kFP16) return __half_raw(__float2half_rn(v)).x;
  return bits_of(v);
}

#ifdef __CUDA_ARCH__
// Whether the hardware rounds every residual of r as slice_of does (below
// kFP16HardwareBits / kBF16HardwareBits; bf16 to nearest only: no scheme
// truncates bf16, schemes.py allows bit-cut fp16 only). NaN and Inf fail
// both; tf32 never passes.
template <int N>
__device__ __forceinline__ bool in_hardware_range(const SplitProblem& p, const float (&r)[N]) {
  uint32_t a = 0;
#pragma unroll
  for (int q = 0; q < N; ++q) a = max(a, abs_bits(r[q]));
  if (p.type == SliceType::kFP16) return a < kFP16HardwareBits;
  return p.type == SliceType::kBF16 && !p.truncate && a < kBF16HardwareBits;
}

// The 16-bit slices of two residuals r0, r1 in one conversion instruction
// (kKind 0: cvt.rn.f16x2.f32, 1: cvt.rz.f16x2.f32, 2: cvt.rn.bf16x2.f32;
// r0 into the low half), both within in_hardware_range: the storage word
// (storage_bits of both) in *w, the slice values in *h0, *h1. The split's
// cost is its conversions (one to round, one to store, per value and
// slice, in slice_of's form): here one per two.
template <int kKind>
__device__ __forceinline__ void slice_pair_hw(float r0, float r1, uint32_t* w, float* h0, float* h1) {
  if constexpr (kKind == 2) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(*w) : "f"(r1), "f"(r0));
    *h0 = float_from_bits(*w << 16), *h1 = float_from_bits(*w & 0xFFFF0000u);
  } else {
    if constexpr (kKind == 1) asm("cvt.rz.f16x2.f32 %0, %1, %2;" : "=r"(*w) : "f"(r1), "f"(r0));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(*w) : "f"(r1), "f"(r0));
    __half2 h;
    static_assert(sizeof(h) == sizeof(*w), "two halves in a word");
    memcpy(&h, w, sizeof(h));
    const float2 f = __half22float2(h);
    *h0 = f.x, *h1 = f.y;
  }
}

// Every pair of r (all within in_hardware_range) by slice_pair_hw<kKind>,
// with no test or branch per pair: a range test and fallback per pair cost
// ~10 instructions where the conversion takes 3 (H200 ncu, stop 56).
template <int kKind, int N>
__device__ __forceinline__ void slice_pairs_hw(const float (&r)[N], uint32_t (&w)[N], float (&h)[N]) {
#pragma unroll
  for (int q = 0; q < N; q += 2) slice_pair_hw<kKind>(r[q], r[q + 1], &w[q / 2], &h[q], &h[q + 1]);
}
#endif

// x 2^e for a row's values (scale_pow2), in one multiplication per value
// where 0 <= e <= 127: 2^e is then a normal float >= 1 and every product
// exact (a row's largest finite value scales below 2^14; Inf and NaN stay
// so), the same bits as the three. A row that scales down (e < 0) or whose
// largest value is subnormal (e > 127) takes scale_pow2's three
// multiplications, whose roundings xla.py's ldexp shares.
template <int N>
__host__ __device__ __forceinline__ void scale_row(const float (&v)[N], int e, float (&out)[N]) {
  if (e >= 0 && e <= 127) {
    const float f = pow2f(e);
#pragma unroll
    for (int q = 0; q < N; ++q) out[q] = v[q] * f;
  } else {
#pragma unroll
    for (int q = 0; q < N; ++q) out[q] = scale_pow2(v[q], e);
  }
}

// N consecutive values (k0 .. k0 + N - 1, one tile: N divides TK) of output
// row row_id (b * rows + r: batch entry b, row r), scaled by 2^e when the
// problem has exponents: their slices stored at the tile's slice rows
// (16-bit formats: N / 2 words per slice; tf32: N words).
template <int N>
__host__ __device__ __forceinline__ void write_slices(const SplitProblem& p, const float (&v)[N], int e, int64_t row_id,
                                                      int64_t k0) {
  const int lg = split_tile_k_log2(p.type), tk = 1 << lg;  // (k0, k_out >= 0: shifts, not divisions)
  const int64_t tile = k0 >> lg, j = k0 & (tk - 1);
  const int64_t base = (((row_id * (p.k_out >> lg) + tile) * p.slices) << lg) + j;  // slice 0's first element
  const float step = pow2f(p.lo_scale_bits);
  float res[N];  // r_i of each value: r_0 = x (scaled), r_{i+1} = (r_i - s_i) 2^sb, exact
  if (p.exp || p.exp_out) {
    scale_row<N>(v, e, res);
  } else {
#pragma unroll
    for (int q = 0; q < N; ++q) res[q] = v[q];
  }
#pragma unroll
  for (int i = 0; i < kMaxSlices; ++i) {  // unrolled: res stays in registers
    if (i >= p.slices) break;
    uint32_t w[N];  // N words (tf32) or N / 2 (two 16-bit values each)
    if (p.type == SliceType::kTF32) {
#pragma unroll
      for (int q = 0; q < N; ++q) {
        const float h = slice_of(p, res[q]);
        w[q] = storage_bits(p.type, h);
        res[q] = (res[q] - h) * step;
      }
      uint32_t* dst = static_cast<uint32_t*>(p.out) + base + int64_t(i) * tk;
#pragma unroll
      for (int q = 0; q < N; q += 4) *reinterpret_cast<uint4*>(dst + q) = make_uint4(w[q], w[q + 1], w[q + 2], w[q + 3]);
    } else {
      float h[N];  // the slice's values
#ifdef __CUDA_ARCH__
      if (in_hardware_range<N>(p, res)) {  // (one test for the N values: the common case)
        if (p.type == SliceType::kBF16) slice_pairs_hw<2>(res, w, h);
        else if (p.truncate) slice_pairs_hw<1>(res, w, h);
        else slice_pairs_hw<0>(res, w, h);
      } else
#endif
      {
#pragma unroll
        for (int q = 0; q < N; q += 2) {
          h[q] = slice_of(p, res[q]), h[q + 1] = slice_of(p, res[q + 1]);
          w[q / 2] = storage_bits(p.type, h[q]) | (storage_bits(p.type, h[q + 1]) << 16);
        }
      }
#pragma unroll
      for (int q = 0; q < N; ++q) res[q] = (res[q] - h[q]) * step;
      uint16_t* dst = static_cast<uint16_t*>(p.out) + base + int64_t(i) * tk;
      if constexpr (N == 4) {
        *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
      } else {
#pragma unroll
        for (int q = 0; q < N / 2; q += 4) *reinterpret_cast<uint4*>(dst + 2 * q) = make_uint4(w[q], w[q + 1], w[q + 2], w[q + 3]);
      }
    }
  }
}

// The N values k0 .. k0 + N - 1 of row `row` of a (rows, k) float32 array
// x, 0 past k (the padding up to k_out; nothing is read there): 16-byte
// loads on the device where the row allows. The operand's rows
// (load_row_values) and the probe's (SplitProblem::probe).
template <int N>
__host__ __device__ __forceinline__ void load_values(const float* x, int64_t k, int64_t row, int64_t k0, float (&v)[N]) {
#pragma unroll
  for (int j = 0; j < N; ++j) v[j] = 0.f;
  const float* src = x + row * k + k0;
  if (k0 < k) {
#ifdef __CUDA_ARCH__
    if (k0 + N <= k && (k & 3) == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0) {
#pragma unroll
      for (int q = 0; q < N; q += 4) {
        const float4 f = __ldg(reinterpret_cast<const float4*>(src + q));
        v[q] = f.x, v[q + 1] = f.y, v[q + 2] = f.z, v[q + 3] = f.w;
      }
    } else
#endif
    {
#pragma unroll
      for (int j = 0; j < N; ++j)
        if (k0 + j < k) v[j] = src[j];
    }
  }
}

// The N values k0 .. k0 + N - 1 of row row_id (batch * rows + row) of a
// (batch, rows, k) operand, 0 past k (the padding up to k_out).
template <int N>
__host__ __device__ __forceinline__ void load_row_values(const SplitProblem& p, int64_t row_id, int64_t k0, float (&v)[N]) {
  load_values<N>(p.x, p.k, row_id, k0, v);
}

// Not transposed: task t of batch * rows * (k_out / N) handles the N values
// k0 .. k0 + N - 1 of one row (N = 4 or 8: it divides every tile's K);
// adjacent tasks are adjacent in memory (a warp reads 32 N contiguous floats
// and writes, per slice, 32 N contiguous values over 32 N / TK tiles; the
// kernel takes N = 8: 16-byte stores of 16-bit slices, and half the index
// arithmetic per value). Returns the largest abs_bits of the values.
template <int N = 4>
__host__ __device__ __forceinline__ uint32_t split_rows_task(const SplitProblem& p, int64_t t) {
  static_assert(N == 4 || N == 8, "4 or 8 values per task");
  int64_t row_id, group;
  divmod(t, p.k_out / N, &row_id, &group);
  const int64_t k0 = group * N;
  float v[N];
  load_row_values<N>(p, row_id, k0, v);
  write_slices<N>(p, v, p.exp ? p.exp[row_id] : 0, row_id, k0);
  uint32_t m = 0;
#pragma unroll
  for (int j = 0; j < N; ++j) m = abs_bits(v[j]) > m ? abs_bits(v[j]) : m;
  return m;
}

// |x|'s bits for a finite x, 0 for NaN and +-Inf: as integers they order
// the finite values, so a row's maximum of them is the bits of its largest
// finite |value| (xla.py: row_scale_exponents' amax).
__host__ __device__ __forceinline__ uint32_t finite_abs_bits(float x) {
  const uint32_t a = abs_bits(x);
  return a < 0x7F800000u ? a : 0u;
}

// fp16's row scaling puts a row's largest finite |x| in [2^13, 2^14)
// (xla.py: FP16_ROW_TOP_EXP): the split's exponents (fp16_row_exponent) and
// the FP32-operand kernel's (transform.cuh: exponent_of) alike.
constexpr int kFp16RowTopExp = 13;

// fp16's row-scaling exponent from the bits of a row's largest finite |x|
// (xla.py: scale_exponents): kFp16RowTopExp - floor(log2 max), exact for
// subnormals; 0 for a row without a finite nonzero value.
__host__ __device__ __forceinline__ int fp16_row_exponent(uint32_t finite_max_bits) {
  if (finite_max_bits == 0) return 0;
  const int biased = int(finite_max_bits >> 23);
  if (biased > 0) return kFp16RowTopExp - (biased - 127);
  uint32_t m = finite_max_bits & 0x7FFFFFu;  // subnormal: m 2^-149, floor(log2) = -149 + floor(log2 m)
  int lg = -1;
  while (m) ++lg, m >>= 1;
  return kFp16RowTopExp - (-149 + lg);
}

// Lanes (threads) per row and tasks (8 values each) per lane of the split
// that finds fp16's row exponents for rows of `groups` = k_out / 8 groups
// (k_out <= kSplitExpBlockMaxK): up to kSplitExpMaxK, a warp's lanes
// (split_rows_exp_kernel, ffi/fused_dispatch.cu), the fewest that cover a
// row; past it, a block's 256 threads (split_rows_exp_block_kernel) with 2
// or 4 tasks. Not 3 for rows of 513 to 768 groups: a task past the row's
// end loads and writes nothing, and adds exact zeros to the statistics
// (+0 to a sum, 0 to a maximum, inf to a minimum), so the fourth changes
// no bit and no rounding of 3 tasks (the chain is ceil(groups / 256) x 8
// values long either way), and one kernel fewer is compiled. Here so that
// the host's reference of the row statistics' reduction (tests/native/
// split_check.cu) takes the kernel's.
struct SplitExpShape {
  int lanes, tasks;
};
constexpr int kSplitExpBlockThreads = 256;
__host__ __device__ __forceinline__ SplitExpShape split_exp_shape(int64_t groups) {
  if (groups <= 8) return {8, 1};
  if (groups <= 16) return {16, 1};
  if (groups <= 32) return {32, 1};
  if (groups <= 64) return {32, 2};
  if (groups <= 128) return {32, 4};
  if (groups <= 256) return {32, 8};
  if (groups <= 2 * kSplitExpBlockThreads) return {kSplitExpBlockThreads, 2};
  return {kSplitExpBlockThreads, 4};
}

// Transposed: the 16 values k0 .. k0 + 15 of output row r, read as
// col[j * stride] for j < valid (0 beyond: padding); the device kernel
// passes a column of its shared-memory tile (ffi/common/tiles.cuh), the host
// test the operand itself. Returns the largest abs_bits of the values.
__host__ __device__ __forceinline__ uint32_t split_transposed_task(const SplitProblem& p, int64_t b, int64_t r, int64_t k0,
                                                               const float* col, int64_t stride, int valid) {
  float v[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) v[j] = j < valid ? col[j * stride] : 0.f;
  const int64_t row_id = b * p.rows + r;
  write_slices<16>(p, v, p.exp ? p.exp[row_id] : 0, row_id, k0);
  uint32_t m = 0;
#pragma unroll
  for (int j = 0; j < 16; ++j) m = abs_bits(v[j]) > m ? abs_bits(v[j]) : m;
  return m;
}

}  // namespace fused
}  // namespace jaxemu
