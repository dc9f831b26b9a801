// The FP32-operand kernel's split (traits_f32.cuh): the consumer warpgroups
// cut one FP32 stage (A's 128 x 32 and B's 32 x 128 values) into the slice
// tiles wgmma reads, in shared memory. Each value is cut as split.cuh cuts it
// (slice_of, storage_bits: the same slices, bit for bit, as the split kernel
// writes to global memory), fp16's after the row scaling (Scales).
//
// Who cuts what: consumer warpgroup wg takes A's rows [64 wg, 64 wg + 64)
// (the rows its own wgmma read) and B's columns [64 wg, 64 wg + 64) (both
// warpgroups read all of B: they meet at a barrier before the tile is used,
// mainloop_f32.cuh). Each thread takes four runs of 4 consecutive values
// (16-byte reads: a warp reads four whole 128-byte rows of the stage, free
// of bank conflicts) and writes each slice's 4 values as one 8-byte store
// (contiguous in both slice layouts: 4 K-steps of a K-major A row, 4 columns
// of MN-major B). tf32 (T::kTf32): A's runs as those, each slice's 4 values
// one 16-byte store; B's slices are K-major (wgmma reads tf32 no other
// way) while its stage holds N contiguous, so B's cut transposes
// (run_b_tf32): a thread's run is 4 K-steps of one column, read as 4 single
// floats (a warp's 32 lanes read 32 adjacent columns of one K-step: one
// 128-byte row) and stored as one 16-byte word per slice (32 rows of the
// slice tile, 8 swizzled positions: the 4 wavefronts 512 bytes need).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/numeric_types.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "f32_special.cuh"  // not_finite
#include "params.h"
#include "scheduler.cuh"
#include "split.cuh"

namespace jaxemu {
namespace fused {

template <class T>
struct Transform {
  static constexpr int TM = T::kTileM, TN = T::kTileN, TK = T::kTileK, SA = T::kSlicesA, SB = T::kSlicesB;
  static constexpr int kRowsPerGroup = TM / T::kConsumerWarpgroups, kColsPerGroup = TN / T::kConsumerWarpgroups;
  static constexpr int kRunsA = kRowsPerGroup * TK / 4 / 128, kRunsB = kColsPerGroup * TK / 4 / 128;
  static_assert(kRunsA * 4 * 128 == kRowsPerGroup * TK && kRunsB * 4 * 128 == kColsPerGroup * TK,
                "whole runs of 4 values per thread");
  static_assert(kColsPerGroup / 4 <= 128 && 128 % (kColsPerGroup / 4) == 0,
                "every run of a thread covers the same 4 columns of B (Scales)");
  // One FP32 stage, one slice tile (elements): consecutive stages and slices
  // lie this far apart, a multiple of the swizzle pattern's period, so an
  // offset within stage 0 / slice 0 plus a multiple of these is the address.
  static constexpr int kStageA32 = int(cosize_v<typename T::SmemTileA32>);
  static constexpr int kStageB32 = int(cosize_v<typename T::SmemTileB32>);
  static constexpr int kSliceA = TM * TK, kSliceB = TN * TK;
  // Run j of consumer thread t of warpgroup wg: A's row r and first K-step
  // k, B's first column r and K-step k (4 consecutive values each).
  struct Run {
    int r, k;
  };
  static CUTE_HOST_DEVICE Run run_a(int wg, int t, int j) {
    const int f = t + 128 * j;  // row f / (TK / 4), K-steps 4 (f % (TK / 4)) ..
    return {wg * kRowsPerGroup + f / (TK / 4), 4 * (f % (TK / 4))};
  }
  static CUTE_HOST_DEVICE Run run_b(int wg, int t, int j) {
    const int f = t + 128 * j;  // columns 4 (f % (cols / 4)) .., K-step f / (cols / 4)
    return {wg * kColsPerGroup + 4 * (f % (kColsPerGroup / 4)), f / (kColsPerGroup / 4)};
  }
  // Run j + 1 lies kRunRowsA rows of A (kRunStepsB K-steps of B) past run j:
  // whole swizzle atoms in every layout here, so the swizzle, which acts on
  // address bits below that distance, maps both alike, and their offsets
  // differ by a constant (tests/native/f32_layout_check.cu checks it for
  // every thread and configuration). So only run 0's offsets are kept, in 4
  // registers instead of 16, and the cut loads all of a thread's runs
  // before its first store (with the registers that frees): the stores could
  // alias the stage as far as the compiler knows, so it would keep each
  // load behind the previous run's stores, one shared-memory latency per
  // run. H200, fp16x3 at the k-means update, 5.07 -> 4.29 ms
  // (docs/performance.md, stop 52).
  static constexpr int kRunRowsA = 128 / (TK / 4), kRunStepsB = 128 / (kColsPerGroup / 4);
  static constexpr int kRunA32 = kRunRowsA * TK;   // K-major rows of TK floats
  static constexpr int kRunA = kRunRowsA * TK;     // K-major rows of TK slices
  static constexpr int kRunB32 = kRunStepsB * 32;  // 32 x 8 float atoms, stacked along K first
  static constexpr int kRunB = kRunStepsB * TN;    // MN-major rows of TN slices
  // tf32's transposing cut of B (run_b_tf32): run j of thread t takes
  // column t % 64 of its warpgroup's 64 and K-steps k .. k + 3, k = 4 (t /
  // 64) + 8 j. Its stage offsets: run 0's 4 K-steps (Offsets::bt32, one per
  // K-step: the swizzle moves each K-step's row), run j a whole 32 x 8 atom
  // (kRunBT32) past run j - 1; its slice offsets one per run (Offsets::bt:
  // in the K-major slice tile the swizzle mixes the run's K with the
  // column's row, no constant distance).
  static constexpr int kRunStepsBT = 4 * 128 / kColsPerGroup;
  static constexpr int kRunBT32 = kRunStepsBT * 32;
  static CUTE_HOST_DEVICE Run run_b_tf32_at(int wg, int t, int j) {
    return {wg * kColsPerGroup + t % kColsPerGroup, 4 * (t / kColsPerGroup) + kRunStepsBT * j};
  }
  // Slice storage words: two 16-bit values per 32-bit word, or one tf32.
  using Word = std::conditional_t<sizeof(typename T::Element) == 4, uint32_t, uint16_t>;

  // This thread's run 0 as element offsets at stage 0, slice 0 (computed
  // once: the swizzled layouts' arithmetic then costs one add per access).
  // With A's slices in registers: the FP32 stage offset of each pair of
  // this thread's A fragment elements (cut_a_regs).
  static constexpr int kPairsA = TM * TK / (128 * T::kConsumerWarpgroups) / 2;
  struct Offsets {
    int a32, a, b32, b, ra32[kPairsA], bt32[4], bt[kRunsB];
  };
  static __device__ __forceinline__ Offsets offsets(typename T::SharedStorage& smem) {
    const int wg = int(threadIdx.x) / 128 - 1, t = int(threadIdx.x) % 128;
    Tensor sA32 = make_tensor(make_smem_ptr(smem.a32.data()), typename T::SmemLayoutA32{});  // (TM, TK, stage)
    Tensor sB32 = make_tensor(make_smem_ptr(smem.b32.data()), typename T::SmemLayoutB32{});  // (TN, TK, stage)
    Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename T::SmemLayoutA{});        // (TM, TK, slice + SA buf)
    Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename T::SmemLayoutB{});        // (TN, TK, slice + SB buf)
    Offsets o;
    const Run ra = run_a(wg, t, 0), rb = run_b(wg, t, 0);
    o.a32 = int(&sA32(ra.r, ra.k, 0) - smem.a32.data());
    o.a = int(&sA(ra.r, ra.k, 0) - smem.a.data());
    o.b32 = int(&sB32(rb.r, rb.k, 0) - smem.b32.data());
    o.b = int(&sB(rb.r, rb.k, 0) - smem.b.data());
    if constexpr (T::kRegisterA) {
      // (Offsets from the array's own pointer: loads the compiler sees as
      // shared-memory ones, LDS; through the swizzled tensor they were
      // generic.)
      typename T::TiledMma mma;
      Tensor tA32 = mma.get_thread_slice(threadIdx.x - 128).partition_A(sA32(_, _, 0));  // (MMA, MMA_M, MMA_K)
      static_assert(int(size(decltype(tA32){})) == 2 * kPairsA, "A fragment size");
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kPairsA; ++j) o.ra32[j] = int(&tA32(2 * j) - smem.a32.data());
    }
    if constexpr (T::kTf32) {
      const Run r0 = run_b_tf32_at(wg, t, 0);
      CUTLASS_PRAGMA_UNROLL
      for (int q = 0; q < 4; ++q) o.bt32[q] = int(&sB32(r0.r, r0.k + q, 0) - smem.b32.data());
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kRunsB; ++j) {
        const Run r = run_b_tf32_at(wg, t, j);
        o.bt[j] = int(&sB(r.r, r.k, 0) - smem.b.data());
      }
    }
    return o;
  }

  // fp16's row scaling for one work item (T::kScaled): this thread's rows
  // of A (one per run) and its 4 columns of B (the same for all its runs),
  // each as two factors 2^e1, 2^e2 with e1 + e2 = e (e = 13 - floor(log2
  // max) lies in [-114, 162], past float's normal powers of two; each half
  // in [-57, 81]). x 2^e1 2^e2 is exact wherever x 2^e is a normal float,
  // as split.cuh's scale_pow2 is; where it is not (|x 2^e| < 2^-126, far
  // below fp16's smallest subnormal) both give slices of zero.
  static constexpr int kFactors = T::kExpsInKernel ? 1 : 2;
  struct Scales {
    // Factors per row (column): two, whose product 2^e reaches past float's
    // normal powers of two (given exponents); one where the kernel finds
    // them, their exponent held within float's (choose_rows).
    float a[kRunsA][kFactors], b[4][kFactors];
    // Exponents found in the kernel (T::kExpsInKernel): bit j set while the
    // row of run j has no scale yet, bit 4 + q while column q has none.
    uint32_t unset = 0;
  };
  static __device__ __forceinline__ void factors(int e, float (&f)[1]) {
    f[0] = __int_as_float((min(e, 127) + 127) << 23);
  }
  static __device__ __forceinline__ void factors(int e, float (&f)[2]) {
    const int e1 = e >> 1;
    f[0] = __int_as_float((e1 + 127) << 23);
    f[1] = __int_as_float((e - e1 + 127) << 23);
  }
  static __device__ __forceinline__ Scales scales(Problem const& p, WorkTile const& w) {
    Scales sc;
    if constexpr (T::kScaled) {
      const int wg = int(threadIdx.x) / 128 - 1, t = int(threadIdx.x) % 128;
      const int32_t* row_exp = p.row_exp + int64_t(w.l) * p.m;
      const int32_t* col_exp = p.col_exp + int64_t(w.l) * p.n;
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kRunsA; ++j) {  // the rows of this thread's runs
        const int64_t r = int64_t(w.m_blk) * TM + run_a(wg, t, j).r;
        factors(r < p.m ? __ldg(row_exp + r) : 0, sc.a[j]);
      }
      CUTLASS_PRAGMA_UNROLL
      for (int q = 0; q < 4; ++q) {  // its runs' 4 columns (the same in each run)
        const int64_t c = int64_t(w.n_blk) * TN + run_b(wg, t, 0).r + q;
        factors(c < p.n ? __ldg(col_exp + c) : 0, sc.b[q]);
      }
    }
    return sc;
  }

  // fp16's exponents found in the kernel (T::kExpsInKernel, Problem::
  // item_exp) instead of a pass over A and B first. A row's (column's)
  // exponent is chosen at the first K-tile of the work item where it holds
  // a nonzero finite value: from that tile's largest |value| m,
  // e = 13 - exp_headroom - floor(log2 m), row_scale_exponents' rule
  // (jaxemu/backends/xla.py) exp_headroom binades lower. The K-tiles before
  // it are all zero in that row, so their slices and products are zero at
  // any scale, and every nonzero product carries the final exponents. A
  // later value past the headroom (beyond ~2^exp_headroom m) rounds to Inf
  // in fp16 or in its lo slice, every entry of C that reads it is not
  // finite, the flag rises, and the caller redoes the product with the
  // passes' exponents (cuda_fused.f32_product): no silent overflow. Values
  // small against m lose bits as they do against the row's maximum under
  // the pass's scaling (m is at most that), exp_headroom binades sooner. A
  // row all zero in the item's K-range keeps no scale: its entries of the
  // partial are 0 at any exponent (0 written). Dense data
  // choose every scale at the item's first K-tile; after that the check is
  // one warp vote per K-tile and operand.
  // (Rows past M and columns past N start chosen: they are zero, and so no
  // K-tile would ever settle them; the choice depends on the index only, so
  // it keeps choose_cols' branch uniform over the warpgroup.)
  static __device__ __forceinline__ Scales unchosen(Problem const& p, WorkTile const& w) {
    static_assert(kRunsA <= 4, "unset: 4 bits of rows, then 4 of columns");
    const int wg = int(threadIdx.x) / 128 - 1, t = int(threadIdx.x) % 128;
    Scales sc;
    sc.unset = 0;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kRunsA; ++j) {
      for (float& f : sc.a[j]) f = 1.f;
      if (int64_t(w.m_blk) * TM + run_a(wg, t, j).r < p.m) sc.unset |= 1u << j;
    }
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < 4; ++q) {
      for (float& f : sc.b[q]) f = 1.f;
      if (int64_t(w.n_blk) * TN + run_b(wg, t, 0).r + q < p.n) sc.unset |= 1u << (4 + q);
    }
    return sc;
  }
  static __device__ __forceinline__ float finite_abs(float x) { return not_finite(x) ? 0.f : fabsf(x); }
  static __device__ __forceinline__ float max4(float4 v) {
    return fmaxf(fmaxf(finite_abs(v.x), finite_abs(v.y)), fmaxf(finite_abs(v.z), finite_abs(v.w)));
  }
  static __device__ __forceinline__ int exponent_of(float m, int headroom) {
    return kFp16RowTopExp - headroom - ilogbf(m);
  }
  // e of factors() (exact powers of two)
  static __device__ __forceinline__ int exponent_of_factors(float const (&f)[kFactors]) {
    int e = 0;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kFactors; ++i) e += int((__float_as_uint(f[i]) >> 23) & 0xFF) - 127;
    return e;
  }
  // x times a row's (column's) factors, in order (exact where x 2^e is a
  // normal float: split.cuh's scale_pow2)
  static __device__ __forceinline__ float scaled(float x, float const (&f)[kFactors]) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kFactors; ++i) x *= f[i];
    return x;
  }
  // Rows still without a scale, from this K-tile's runs of A (a row's 32
  // values lie in 8 adjacent lanes, 4 each; they agree on its state).
  static __device__ __forceinline__ void choose_rows(float4 const (&va)[kRunsA], int headroom, Scales& sc) {
    if (!__any_sync(0xffffffffu, sc.unset & ((1u << kRunsA) - 1))) return;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kRunsA; ++j) {
      float m = max4(va[j]);
      CUTLASS_PRAGMA_UNROLL
      for (int d = 1; d < TK / 4; d *= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
      if ((sc.unset >> j & 1u) && m > 0.f) {
        factors(exponent_of(m, headroom), sc.a[j]);
        sc.unset &= ~(1u << j);
      }
    }
  }
  // Columns still without a scale, from this K-tile's runs of B: a column's
  // 32 K-steps lie in lanes l and l + 16 of each of the warpgroup's 4 warps,
  // which meet in shared memory. Every warp holds all 64 of its columns'
  // states (lanes 0..15), the same in each, so all 4 take the branch or none.
  static constexpr uint32_t kColMaxBarrier = 4;  // + wg: per warpgroup, after the step barrier's id
  static __device__ __forceinline__ void choose_cols(float4 const (&vb)[kRunsB], int headroom,
                                                     typename T::SharedStorage& smem, Scales& sc) {
    static_assert(kColsPerGroup / 4 == 16, "a column's K-steps in lanes l and l + 16 of each warp (run_b)");
    if (!__any_sync(0xffffffffu, sc.unset & 0xF0u)) return;
    const int wg = int(threadIdx.x) / 128 - 1, t = int(threadIdx.x) % 128, lane = t % 32, warp = t / 32;
    float cm[4] = {0.f, 0.f, 0.f, 0.f};
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kRunsB; ++j) {
      cm[0] = fmaxf(cm[0], finite_abs(vb[j].x)), cm[1] = fmaxf(cm[1], finite_abs(vb[j].y));
      cm[2] = fmaxf(cm[2], finite_abs(vb[j].z)), cm[3] = fmaxf(cm[3], finite_abs(vb[j].w));
    }
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < 4; ++q) cm[q] = fmaxf(cm[q], __shfl_xor_sync(0xffffffffu, cm[q], 16));
    float* mine = smem.colmax.data() + wg * 4 * kColsPerGroup;  // (warp, column of the warpgroup's 64)
    const int c = 4 * (lane % 16);  // this thread's first column of the warpgroup's 64 (run_b)
    if (lane < 16) *reinterpret_cast<float4*>(mine + warp * kColsPerGroup + c) = make_float4(cm[0], cm[1], cm[2], cm[3]);
    cutlass::arch::NamedBarrier::sync(128, kColMaxBarrier + wg);
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < 4; ++q) {
      float m = 0.f;
      CUTLASS_PRAGMA_UNROLL
      for (int v = 0; v < 4; ++v) m = fmaxf(m, mine[v * kColsPerGroup + c + q]);
      if ((sc.unset >> (4 + q) & 1u) && m > 0.f) {
        factors(exponent_of(m, headroom), sc.b[q]);
        sc.unset &= ~(1u << (4 + q));
      }
    }
    // (The next K-tile's maxima are written after the step barrier that
    // ends this one: mainloop_f32.cuh.)
  }
  // At the end of a work item: the exponents its epilogue undoes, written
  // by the first thread to hold each (0 for a row or column that stayed
  // zero); every work item of the same rows and K-split writes the same.
  static __device__ __forceinline__ void write_exponents(Problem const& p, WorkTile const& w, Scales const& sc) {
    const int wg = int(threadIdx.x) / 128 - 1, t = int(threadIdx.x) % 128;
    int32_t* rows = p.item_exp + (int64_t(w.split) * p.batch + w.l) * p.m;
    int32_t* cols = p.item_exp + int64_t(p.splits) * p.batch * p.m + (int64_t(w.split) * p.batch + w.l) * p.n;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kRunsA; ++j) {
      const int64_t r = int64_t(w.m_blk) * TM + run_a(wg, t, j).r;
      if (t % (TK / 4) == 0 && r < p.m) rows[r] = sc.unset >> j & 1u ? 0 : exponent_of_factors(sc.a[j]);
    }
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < 4; ++q) {
      const int64_t c = int64_t(w.n_blk) * TN + run_b(wg, t, 0).r + q;
      if (t < 16 && c < p.n) cols[c] = sc.unset >> (4 + q) & 1u ? 0 : exponent_of_factors(sc.b[q]);
    }
  }

  // The slices of 2 values, two per 32-bit word (the low half the first):
  // s_i = round(r_i) to nearest even, r_{i+1} = (r_i - s_i) 2^lo_scale_bits,
  // two values per conversion instruction (bf16: cvt.rn.bf16x2.f32, fp16:
  // cvt.rn.f16x2.f32, subnormals included). This is split.cuh's slice_of
  // for every value it gives a finite result (bf16: |r| below the midpoint
  // of its largest finite value and 2^128; fp16: every finite scaled value,
  // below 2^14; the same bits); beyond it (and for NaN, Inf) the hardware
  // gives Inf or NaN, the entries of C that read it are not finite, and
  // kernel_f32.cuh's fix-up gives them their FP32 values, which is what
  // FP32's rules ask for there (with exponents found in the kernel, the
  // caller's redo with the passes' exponents first: finish_f32).
  template <int kSlices>
  static __device__ __forceinline__ void cut2(float step, float x0, float x1, uint32_t (&out)[kSlices]) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kSlices; ++i) {
      float h0, h1;
      if constexpr (T::kScaled) {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(out[i]) : "f"(x1), "f"(x0));
        __half2 h;
        memcpy(&h, &out[i], sizeof(h));
        const float2 f = __half22float2(h);
        h0 = f.x, h1 = f.y;
      } else {
        const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
        out[i] = *reinterpret_cast<const uint32_t*>(&h);
        h0 = __uint_as_float(out[i] << 16), h1 = __uint_as_float(out[i] & 0xFFFF0000u);
      }
      if (i + 1 < kSlices) {
        x0 = (x0 - h0) * step;
        x1 = (x1 - h1) * step;
      }
    }
  }

  // tf32 (T::kTf32): the slices of 4 values, each slice's 4 as one 16-byte
  // word: s_i = r_i to nearest even on tf32's grid, r_{i+1} = (r_i - s_i)
  // 2^lo_scale_bits. The rounding is one instruction (cvt.rn.tf32.f32):
  // split.cuh's round_bits in bit code took ~20 per value and made the cut,
  // not the tensor cores, bound the K-loop (0.52 ms at 2048^3 against the
  // slice path's 0.19; stop 61). It gives round_bits' bits for every value
  // but those within half a tf32 step of float's largest (round_bits
  // truncates them, the instruction gives Inf: C's entries that read it are
  // not finite and the fix-up gives them FP32's values) and NaN's payload
  // (tests/native/tf32_round_check.cu, every float on the GPU). NaN and Inf
  // give slices that are not finite, as the bf16 cut's do.
  static __device__ __forceinline__ float tf32_rn(float x) {
    uint32_t r;
    asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return __uint_as_float(r & 0xFFFFE000u);  // (the low 13 bits zero, whatever the instruction leaves there)
  }
  template <int kSlices>
  static __device__ __forceinline__ void cut4_tf32(float step, float4 v, uint4 (&out)[kSlices]) {
    float x[4] = {v.x, v.y, v.z, v.w};
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kSlices; ++i) {
      uint32_t w[4];
      CUTLASS_PRAGMA_UNROLL
      for (int q = 0; q < 4; ++q) {
        const float h = tf32_rn(x[q]);
        w[q] = __float_as_uint(h);
        if (i + 1 < kSlices) x[q] = (x[q] - h) * step;
      }
      out[i] = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }

  template <int kSlices>
  static __device__ __forceinline__ void cut4(float step, float4 v, uint2 (&out)[kSlices]) {
    uint32_t lo[kSlices], hi[kSlices];
    cut2<kSlices>(step, v.x, v.y, lo);
    cut2<kSlices>(step, v.z, v.w, hi);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kSlices; ++i) out[i] = make_uint2(lo[i], hi[i]);
  }

  // FP32 stage `stage` -> slice buffer `buf`, this thread's share: A's rows
  // (unless A's slices live in registers: cut_a_regs), then B's columns,
  // scaled first where T::kScaled; each side's runs all loaded before the
  // first is cut and stored (kRunA32).
  // T::kExpsInKernel: the exponents are found here (choose_rows,
  // choose_cols; `headroom`: Problem::exp_headroom).
  static __device__ __forceinline__ void run(SplitProblem const& sp, typename T::SharedStorage& smem,
                                             Offsets const& o, int stage, int buf, Scales& sc, int headroom = 0) {
    const float step = pow2f(sp.lo_scale_bits);
    if constexpr (!T::kRegisterA) {
      const float* a32 = smem.a32.data() + stage * kStageA32;
      auto* a = reinterpret_cast<Word*>(smem.a.data()) + SA * buf * kSliceA;
      float4 va[kRunsA];
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kRunsA; ++j) va[j] = *reinterpret_cast<float4 const*>(a32 + o.a32 + j * kRunA32);
      if constexpr (T::kExpsInKernel) choose_rows(va, headroom, sc);
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kRunsA; ++j) {
        float4 v = va[j];
        if constexpr (T::kScaled) {
          v.x = scaled(v.x, sc.a[j]), v.y = scaled(v.y, sc.a[j]);
          v.z = scaled(v.z, sc.a[j]), v.w = scaled(v.w, sc.a[j]);
        }
        if constexpr (T::kTf32) {
          uint4 w4[SA];
          cut4_tf32<SA>(step, v, w4);
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < SA; ++i) *reinterpret_cast<uint4*>(a + o.a + j * kRunA + i * kSliceA) = w4[i];
        } else {
          uint2 w[SA];
          cut4<SA>(step, v, w);
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < SA; ++i) *reinterpret_cast<uint2*>(a + o.a + j * kRunA + i * kSliceA) = w[i];
        }
      }
    }
    if constexpr (T::kTf32) {
      run_b_tf32(step, smem, o, stage, buf);
      return;
    }
    const float* b32 = smem.b32.data() + stage * kStageB32;
    auto* b = reinterpret_cast<uint16_t*>(smem.b.data()) + SB * buf * kSliceB;
    float4 vb[kRunsB];
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kRunsB; ++j) vb[j] = *reinterpret_cast<float4 const*>(b32 + o.b32 + j * kRunB32);
    if constexpr (T::kExpsInKernel) choose_cols(vb, headroom, smem, sc);
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kRunsB; ++j) {
      uint2 w[SB];
      float4 v = vb[j];
      if constexpr (T::kScaled) {
        v.x = scaled(v.x, sc.b[0]), v.y = scaled(v.y, sc.b[1]);
        v.z = scaled(v.z, sc.b[2]), v.w = scaled(v.w, sc.b[3]);
      }
      cut4<SB>(step, v, w);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < SB; ++i) *reinterpret_cast<uint2*>(b + o.b + j * kRunB + i * kSliceB) = w[i];
    }
  }

  // tf32's B: this thread's 4 runs of 4 K-steps of one column, all loaded
  // first (as run's), cut, and stored K-major (the header's comment).
  static __device__ __forceinline__ void run_b_tf32(float step, typename T::SharedStorage& smem, Offsets const& o,
                                                    int stage, int buf) {
    const float* b32 = smem.b32.data() + stage * kStageB32;
    auto* b = reinterpret_cast<uint32_t*>(smem.b.data()) + SB * buf * kSliceB;
    float4 vb[kRunsB];
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kRunsB; ++j)
      vb[j] = make_float4(b32[o.bt32[0] + j * kRunBT32], b32[o.bt32[1] + j * kRunBT32],
                          b32[o.bt32[2] + j * kRunBT32], b32[o.bt32[3] + j * kRunBT32]);
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kRunsB; ++j) {
      uint4 w[SB];
      cut4_tf32<SB>(step, vb[j], w);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < SB; ++i) *reinterpret_cast<uint4*>(b + o.bt[j] + i * kSliceB) = w[i];
    }
  }

  // A's slices into registers (T::kRegisterA): this thread's FP32 values of
  // stage `stage` in its A fragment's order (Offsets::ra32: thr_mma's
  // partition_A of the stage), cut into the SA fragments `dst` that the RS
  // wgmma reads. Fragment elements 2j and 2j + 1 are K-steps k and k + 1 of
  // one row, k even (wgmma's A register layout), adjacent in the stage: one
  // 8-byte read gives both, and their slices fill one 32-bit register each
  // (tests/native/f32_layout_check.cu checks this on the host).
  template <class Frag>
  static __device__ __forceinline__ void cut_a_regs(float step, typename T::SharedStorage& smem, Offsets const& o,
                                                    int stage, Frag (&dst)[SA]) {
    const float* a32 = smem.a32.data() + stage * kStageA32;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kPairsA; ++j) {
      const float2 v = *reinterpret_cast<float2 const*>(a32 + o.ra32[j]);
      uint32_t w[SA];
      cut2<SA>(step, v.x, v.y, w);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < SA; ++i) recast<uint32_t>(dst[i])(j) = w[i];
    }
  }
};

}  // namespace fused
}  // namespace jaxemu
