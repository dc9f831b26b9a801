// Compile-time configuration of the fused GEMM that reads FP32 operands and
// splits them in shared memory ("split in kernel"; docs/performance.md, stop
// 32): each operand crosses DRAM once, as FP32, instead of three times (a
// statistics pass, the split kernel's read and write, the GEMM's read of
// the slices). The k-means centre update (1024 x 2^20 x 256) spends ~7 of
// its ~11 ms in those passes with the slices made outside (stop 22's ncu).
//
// Roles (kernel_f32.cuh): warpgroup 0's first thread streams FP32 K-tiles of
// A and B through a TMA pipeline; the two consumer warpgroups split each
// K-tile into the stage's slices in shared memory (transform.cuh) while the
// tensor cores run the previous K-tile's wgmma, then multiply.
//
// Configurations: bf16 slices without scaling (bf16x3, bf16x6, bf16x9: no
// row statistics needed before a slice exists), fp16 slices with fp16x3's
// row scaling (fp16x3: each row of A and column of B scaled by 2^e before
// its cut, e from a pass over the operand made before the launch, the
// Problem's row_exp and col_exp, which the epilogue also undoes), and tf32
// slices (tf32x3). wgmma reads tf32 from shared memory K-major only, and B
// arrives (K, N), N contiguous: its FP32 stage stays as TMA writes it (N
// contiguous) and the cut transposes it into K-major slice tiles
// (transform.cuh: run_b_tf32), so that neither operand makes a pass of its
// own (the k-means update's 4 GiB A: docs/performance.md, stop 61).
#pragma once

#include <type_traits>

#include "cute/tensor.hpp"
#include "cute/atom/mma_atom.hpp"
#include "cute/atom/copy_traits_sm90_tma.hpp"
#include "cute/arch/mma_sm90.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/numeric_types.h"
#include "cutlass/pipeline/sm90_pipeline.hpp"

#include "f32_terms.h"
#include "params.h"
#include "scheduler.cuh"

namespace jaxemu {
namespace fused {

using namespace cute;

template <class Element_, int SlicesA_, int SlicesB_, int Terms0_, bool RegisterA_ = false, int Terms1_ = 0,
          bool ExpsInKernel_ = false>
struct TraitsF32 {
  using Element = Element_;  // the slice format: cutlass::bfloat16_t, cutlass::half_t (scaled rows) or tfloat32_t
  // fp16 slices: each row of A and column of B scaled by 2^e first (fp16x3).
  static constexpr bool kScaled = std::is_same_v<Element, cutlass::half_t>;
  // tf32 slices (in 32-bit words): B's slice tiles K-major, cut from its
  // N-contiguous stage by a transposing cut (transform.cuh).
  static constexpr bool kTf32 = std::is_same_v<Element, cutlass::tfloat32_t>;
  static_assert(kScaled || kTf32 || std::is_same_v<Element, cutlass::bfloat16_t>, "bf16, fp16 or tf32 slices");
  static constexpr int kTileM = 128;  // two consumer warpgroups of 64 rows
  static constexpr int kTileN = 128;
  // 32 K-steps per K-tile: one 128-byte row of FP32 per tile row (the TMA
  // box's swizzle width), and two buffers of slice tiles next to the FP32
  // stages (below).
  static constexpr int kTileK = 32;
  static constexpr int kSlicesA = SlicesA_;
  static constexpr int kSlicesB = SlicesB_;
  // Unscaled 16-bit slices: every term weighs 2^0, one partial accumulator.
  // fp16's scaled lo slices: hi*hi (group 0, Terms0_) and the corrections
  // (group 1, Terms1_, weight 2^-lo_scale_bits) in two partials, as the
  // slice kernel keeps them (traits.cuh). The terms' counts are fixed at
  // compile time (one wgmma batch per K-tile).
  static constexpr int kTerms0 = Terms0_;
  static constexpr int kTerms1 = Terms1_;
  static constexpr int kPartials = kTerms1 > 0 ? 2 : 1;
  static constexpr bool kFixedTerms = true;
  static_assert(kTerms0 >= 1 && kTerms0 + kTerms1 <= kSlicesA * kSlicesB, "terms: pairs of slices");
  static_assert(kScaled == (kTerms1 > 0), "fp16's two weights, bf16's one");
  // fp16's exponents found in the kernel (params.h: Problem::item_exp;
  // transform.cuh: choose_rows) rather than given: a configuration of its
  // own, so that the others' code is not touched by it.
  static constexpr bool kExpsInKernel = ExpsInKernel_;
  static_assert(!kExpsInKernel || kScaled, "exponents of fp16's scaling only");
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kThreads = 128 * (1 + kConsumerWarpgroups);
  // A's slices in registers (wgmma's RS form): each consumer cuts its own 64
  // rows of A straight from the FP32 stage into the wgmma's A fragments, so
  // A's slices never cross shared memory (a write by the cut, a read per
  // term by the wgmma: bf16x6, 72 of ~224 KB per K-tile and SM, which runs
  // at 128 B/cycle against ~1536 tensor cycles: docs/performance.md stop 33).
  static constexpr bool kRegisterA = RegisterA_;
  static_assert(!(kRegisterA && kPartials > 1), "A in registers with one partial only (registers)");
  static_assert(!(kRegisterA && kTf32), "tf32's A in shared memory (cut_a_regs cuts pairs of 16-bit values)");
  static constexpr int term_a(int k) { return f32_term_pair(kSlicesA, kSlicesB, kTerms0, k, true); }
  static constexpr int term_b(int k) { return f32_term_pair(kSlicesA, kSlicesB, kTerms0, k, false); }
  // Registers after setmaxnreg, as traits.cuh: the transform runs in the
  // consumers, next to their two 64-float accumulators (one partial), or
  // three (two partials: the producer thread gives up more).
  static constexpr int kProducerRegs = kPartials > 1 ? 24 : 40;
  static constexpr int kConsumerRegs = kPartials > 1 ? 240 : 232;
  static_assert(128 * kProducerRegs + 128 * kConsumerWarpgroups * kConsumerRegs <= kThreads * 168,
                "setmaxnreg beyond the registers the CTA was launched with");
  // C from registers (the register path of epilogue.cuh): the FP32 stages
  // and the slice buffers take all of shared memory.
  static constexpr bool kTmaStore = false;

  // FP32 staging, as TMA writes it: A (TM, TK) K-major, B (TN, TK) with N
  // contiguous (B arrives (K, N) row-major), both in 128-byte swizzle rows
  // (32 floats), so that a warp's 16-byte reads of 4 whole rows are free of
  // bank conflicts.
  using SmemTileA32 = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<float>{},
                                             make_shape(Int<kTileM>{}, Int<kTileK>{})));
  // (B's atoms stacked along K first: each 32 x 32 block is one contiguous
  // 4 KB TMA box, 4 per K-tile instead of 16 of 1 KB.)
  using SmemTileB32 = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<float>{},
                                             make_shape(Int<kTileN>{}, Int<kTileK>{}), Step<_2, _1>{}));
  static constexpr int kStageFloats = int(cosize_v<SmemTileA32> + cosize_v<SmemTileB32>);
  // Slice tiles, as wgmma reads them: A K-major (16-bit: 64-byte swizzle,
  // 32 K-steps per row; tf32: 128-byte), B MN-major (16-bit) or K-major
  // (tf32); two buffers (the consumers write one while the tensor cores read
  // the other).
  static constexpr int kBuffers = 2;
  // (With A in registers, one unused slice tile: it keeps the layouts' types
  // and the fragment shapes without a second definition.)
  static constexpr int kSmemSlicesA = kRegisterA ? 1 : kSlicesA * kBuffers;
  using SliceAtomA = std::conditional_t<kTf32, GMMA::Layout_K_SW128_Atom<Element>, GMMA::Layout_K_SW64_Atom<Element>>;
  using SliceAtomB = std::conditional_t<kTf32, GMMA::Layout_K_SW128_Atom<Element>, GMMA::Layout_MN_SW128_Atom<Element>>;
  static constexpr auto kMajorB = kTf32 ? GMMA::Major::K : GMMA::Major::MN;
  using SmemLayoutA = decltype(tile_to_shape(SliceAtomA{},
                                             make_shape(Int<kTileM>{}, Int<kTileK>{}, Int<kSmemSlicesA>{})));
  using SmemLayoutB = decltype(tile_to_shape(SliceAtomB{},
                                             make_shape(Int<kTileN>{}, Int<kTileK>{}, Int<kSlicesB * kBuffers>{})));
  static constexpr int kSliceBytes = int(sizeof(Element)) * int(cosize_v<SmemLayoutA> + cosize_v<SmemLayoutB>);
  // fp16 with its exponents found in the kernel: each consumer warp's
  // column maxima of a K-tile of B, met in shared memory (transform.cuh:
  // choose_cols).
  static constexpr int kColMaxFloats = kExpsInKernel ? kConsumerWarpgroups * 4 * (kTileN / kConsumerWarpgroups) : 4;
  // FP32 stages: as many as fit beside the slice buffers in 227 KB (tf32x3:
  // 128 KB of slices, three stages; bf16x6:
  // 96 KB of slices, four stages of 32 KB; fp16x3: 64 KB, five, and with its
  // exponents found in the kernel 2 KB of column maxima too, still five).
  static constexpr int kStages = (227 * 1024 - 1024 - kSliceBytes - 4 * kColMaxFloats) / (4 * kStageFloats);
  static_assert(kStages >= 2, "no room for two FP32 stages");
  using SmemLayoutA32 = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<float>{},
                                               make_shape(Int<kTileM>{}, Int<kTileK>{}, Int<kStages>{})));
  using SmemLayoutB32 = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<float>{},
                                               make_shape(Int<kTileN>{}, Int<kTileK>{}, Int<kStages>{}),
                                               Step<_2, _1, _3>{}));

  using TileShape = Shape<Int<kTileM>, Int<kTileN>, Int<kTileK>>;
  using MmaAtom = std::conditional_t<
      kRegisterA, decltype(GMMA::rs_op_selector<Element, Element, float, TileShape, GMMA::Major::K, kMajorB>()),
      decltype(GMMA::ss_op_selector<Element, Element, float, TileShape, GMMA::Major::K, kMajorB>())>;
  using TiledMma = decltype(make_tiled_mma(MmaAtom{}, Layout<Shape<Int<kConsumerWarpgroups>, _1, _1>>{}));

  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  using PipelineState = typename Pipeline::PipelineState;

  // Global operands as TMA sees them: A (M, K, L) K contiguous; B (N, K, L)
  // N contiguous (the (L, K, N) row-major array read column-wise).
  using GmemLayoutA = Layout<Shape<int32_t, int32_t, int32_t>, Stride<int64_t, _1, int64_t>>;
  using GmemLayoutB = Layout<Shape<int32_t, int32_t, int32_t>, Stride<_1, int64_t, int64_t>>;
  static CUTLASS_HOST_DEVICE GmemLayoutA gmem_layout_a(int32_t m, int32_t k, int32_t batch) {
    return make_layout(make_shape(m, k, batch), make_stride(int64_t(k), _1{}, int64_t(m) * k));
  }
  static CUTLASS_HOST_DEVICE GmemLayoutB gmem_layout_b(int32_t n, int32_t k, int32_t batch) {
    return make_layout(make_shape(n, k, batch), make_stride(_1{}, int64_t(n), int64_t(n) * k));
  }
  using TmaA = decltype(make_tma_copy(SM90_TMA_LOAD{},
                                      make_tensor(make_gmem_ptr(static_cast<float const*>(nullptr)), GmemLayoutA{}),
                                      SmemTileA32{}, make_shape(Int<kTileM>{}, Int<kTileK>{}), _1{}));
  using TmaB = decltype(make_tma_copy(SM90_TMA_LOAD{},
                                      make_tensor(make_gmem_ptr(static_cast<float const*>(nullptr)), GmemLayoutB{}),
                                      SmemTileB32{}, make_shape(Int<kTileN>{}, Int<kTileK>{}), _1{}));
  static constexpr uint32_t kTmaBytesPerStage = uint32_t(4 * kStageFloats);

  struct SharedStorage {
    cute::array_aligned<float, cosize_v<SmemLayoutA32>, 1024> a32;
    cute::array_aligned<float, cosize_v<SmemLayoutB32>, 1024> b32;
    cute::array_aligned<Element, cosize_v<SmemLayoutA>, 1024> a;
    cute::array_aligned<Element, cosize_v<SmemLayoutB>, 1024> b;
    cute::array_aligned<float, kColMaxFloats, 16> colmax;
    typename Pipeline::SharedStorage pipeline;
  };

  struct Params {
    TmaA tma_a;
    TmaB tma_b;
    Problem problem;
    TermPlan plan;
    int k_tiles;
    TileScheduler sched;
    SplitProblem cut;  // how the consumers cut each value (only its type, slices, lo_scale_bits, truncate)
    SplitF32 f32;      // split-K partials and the special-value flag (params.h)
  };
};

}  // namespace fused
}  // namespace jaxemu
