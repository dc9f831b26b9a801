// Compile-time configuration of the fused emulation GEMM: tile shape, shared
// memory layouts, tensor-core instruction, pipeline. Everything the kernel,
// mainloop and epilogue headers agree on lives here.
#pragma once

#include "cute/tensor.hpp"
#include "cute/atom/mma_atom.hpp"
#include "cute/atom/copy_traits_sm90_tma.hpp"
#include "cute/arch/mma_sm90.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/numeric_types.h"
#include "cutlass/pipeline/sm90_pipeline.hpp"

#include "params.h"
#include "scheduler.cuh"

namespace jaxemu {
namespace fused {

using namespace cute;

// Global slices (see params.h): (L, rows, K / TK, S, TK) in memory, i.e. the
// slices of one K-tile of one row side by side, 128 bytes each. As TMA sees
// them: (rows, (TK, K / TK), (S, L)). Shared by the fused kernels and the
// MixPert kernel (ffi/mixpert/traits.cuh: int8 slices).
template <class Element, int TK>
struct SliceGmem {
  using Layout = cute::Layout<Shape<int32_t, Shape<Int<TK>, int32_t>, Shape<int32_t, int32_t>>,
                              Stride<int64_t, Stride<_1, int64_t>, Stride<Int<TK>, int64_t>>>;
  using Tensor = decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), Layout{}));

  static CUTLASS_HOST_DEVICE auto shape(int32_t rows, int32_t k, int32_t slices, int32_t batch) {
    return make_shape(rows, make_shape(Int<TK>{}, k / TK), make_shape(slices, batch));
  }
  static CUTLASS_HOST_DEVICE Layout layout(int32_t rows, int32_t k, int32_t slices, int32_t batch) {
    const int64_t row_stride = int64_t(k) * slices;
    return make_layout(shape(rows, k, slices, batch),
                       make_stride(row_stride, make_stride(_1{}, int64_t(TK) * slices),
                                   make_stride(Int<TK>{}, int64_t(rows) * row_stride)));
  }
};

template <class Element_, int TileN_, int SlicesA_, int SlicesB_, int Partials_, int Terms0_ = 0, int Terms1_ = 0,
          bool HalfTile_ = false>
struct Traits {
  using Element = Element_;  // cutlass::bfloat16_t, cutlass::half_t or cutlass::tfloat32_t
  static constexpr int kTileM = 128;  // two consumer warpgroups of 64 rows
  static constexpr int kTileN = TileN_;
  // One 128-byte swizzle row of K: 64 K-steps of 16-bit slices, 32 of tf32.
  static constexpr int kTileK = 128 / int(sizeof(Element));
  // Slices of each operand in a pipeline stage: all of them, so that every
  // term of a K-tile reads its slice tiles from the one stage (each loaded
  // once from L2, not once per term that uses it). An operand known to hold
  // values exact in the slice format (small integers: a one-hot matrix) has
  // one slice, the other the scheme's count (jaxemu/schemes.py: exact).
  static constexpr int kSlicesA = SlicesA_;
  static constexpr int kSlicesB = SlicesB_;
  // Partial accumulators: one per distinct term weight (TermPlan), each as
  // large as the FP32 total: 1 + kPartials accumulators of TileN / 2 floats
  // per consumer thread.
  static constexpr int kPartials = Partials_;
  static_assert(kPartials >= 1 && kPartials <= kMaxGroups, "one or two partial accumulators");
  static_assert((1 + kPartials) * kTileN / 2 <= 192, "accumulators beyond the consumers' register budget");
  // Terms per K-tile in group 0 (the largest weight) and group 1 (TermPlan),
  // known at compile time, or kTerms0 == 0: read from the Problem at run
  // time (any scheme of this slice type and count). With the counts fixed,
  // the K-tile's wgmma of every term are one unrolled sequence: one
  // warpgroup arrive, one commit group, and the next K-tile's batch issues
  // while this one runs. With run-time counts, ptxas closes a wgmma group
  // after every term (its C7519 notes; docs/performance.md). The slice
  // indices of each term stay run-time values either way.
  static constexpr int kTerms0 = Terms0_;
  static constexpr int kTerms1 = Terms1_;
  static constexpr bool kFixedTerms = kTerms0 > 0;
  static_assert(!kFixedTerms || kTerms0 + kTerms1 <= kMaxTerms, "more terms than a Problem holds");
  static_assert(!kFixedTerms || kPartials == (kTerms1 > 0 ? 2 : 1), "one partial accumulator per term group");
  // Group 0 (hi*hi) promoted after each half K-tile (Problem::kc_sub == 2,
  // short K): a kernel of its own, so that the others' mainloop is the one
  // without it (a run-time choice in every kernel cost 1-3 % at 8192^3
  // and moved tf32x3's 2048^3 by 11 %, H200, stop 63).
  static constexpr bool kHalfTile = HalfTile_;
  static_assert(!kHalfTile || kFixedTerms, "half-K-tile promotion: the fixed-term kernels only");
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kThreads = 128 * (1 + kConsumerWarpgroups);
  // Registers per thread after the split (setmaxnreg), from the CTA's own
  // allocation, 168 per thread at launch (__launch_bounds__(384, 1)): an
  // increase beyond what the producer gives back waits forever. Three
  // accumulators need the consumers' 240 (ptxas spills them at 232), which
  // leaves the producer 24 (a few spilled values in the one thread issuing
  // TMA loads).
  static constexpr int kProducerRegs = kPartials > 1 ? 24 : 40;
  static constexpr int kConsumerRegs = kPartials > 1 ? 240 : 232;
  static_assert(128 * kProducerRegs + 128 * kConsumerWarpgroups * kConsumerRegs <= kThreads * 168,
                "setmaxnreg beyond the registers the CTA was launched with");
  // Epilogue: 128-wide tiles stage C in shared memory and write it with TMA
  // stores (whole 128-byte lines, asynchronous: the next tile's MMAs start at
  // once), which is what short-K products (k-means, kNN: K = 128..256) need,
  // one 64 x 64 block per consumer warpgroup at a time (16 KB each: the
  // stages of every slice leave no room for a whole 64 x 128 block);
  // 192-wide tiles, chosen for long K, store from registers and spend all
  // shared memory on pipeline stages.
  static constexpr bool kTmaStore = kTileN == 128;
  static constexpr int kEpiCols = 64;
  using SmemLayoutC = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<float>{},
                                             make_shape(Int<kTileM / kConsumerWarpgroups>{}, Int<kEpiCols>{})));
  static constexpr int kSmemCFloats = kTmaStore ? int(cosize_v<SmemLayoutC>) * kConsumerWarpgroups : 32;
  // Stages: as many K-tiles (every slice of A and B) as fit in the rest of 227 KB.
  static constexpr int kStageBytes = int(sizeof(Element)) * (kSlicesA * kTileM + kSlicesB * kTileN) * kTileK;
  static constexpr int kStages = (227 * 1024 - 1024 - (kTmaStore ? kSmemCFloats * 4 : 0)) / kStageBytes;
  static_assert(kStages >= 2, "tile too large for a pipeline");

  using TileShape = Shape<Int<kTileM>, Int<kTileN>, Int<kTileK>>;
  using SmemAtom = GMMA::Layout_K_SW128_Atom<Element>;
  // (rows, K, slice + slices * stage): slice s of stage i is tile s + kSlicesA i (B: kSlicesB).
  using SmemLayoutA =
      decltype(tile_to_shape(SmemAtom{}, make_shape(Int<kTileM>{}, Int<kTileK>{}, Int<kSlicesA * kStages>{})));
  using SmemLayoutB =
      decltype(tile_to_shape(SmemAtom{}, make_shape(Int<kTileN>{}, Int<kTileK>{}, Int<kSlicesB * kStages>{})));

  // wgmma 64 x TileN x (16 or 8), FP32 accumulation, both operands K-major in
  // shared memory; the two consumer warpgroups split the tile's 128 rows.
  using MmaAtom = decltype(GMMA::ss_op_selector<Element, Element, float, TileShape>());
  using TiledMma = decltype(make_tiled_mma(MmaAtom{}, Layout<Shape<Int<kConsumerWarpgroups>, _1, _1>>{}));

  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  using PipelineState = typename Pipeline::PipelineState;

  using Gmem = SliceGmem<Element, kTileK>;
  using GmemLayout = typename Gmem::Layout;
  using GmemTensor = typename Gmem::Tensor;
  static CUTLASS_HOST_DEVICE auto gmem_shape(int32_t rows, int32_t k, int32_t slices, int32_t batch) {
    return Gmem::shape(rows, k, slices, batch);
  }
  static CUTLASS_HOST_DEVICE GmemLayout gmem_layout(int32_t rows, int32_t k, int32_t slices, int32_t batch) {
    return Gmem::layout(rows, k, slices, batch);
  }
  using TmaA = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutA{}(_, _, 0),
                                      make_shape(Int<kTileM>{}, Int<kTileK>{}), _1{}));
  using TmaB = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutB{}(_, _, 0),
                                      make_shape(Int<kTileN>{}, Int<kTileK>{}), _1{}));
  static constexpr uint32_t kTmaBytesPerStage = uint32_t(kStageBytes);

  // C as the TMA store sees it: (M, N, split * L + l), N contiguous.
  using GmemLayoutC = Layout<Shape<int32_t, int32_t, int32_t>, Stride<int64_t, _1, int64_t>>;
  using TmaC = decltype(make_tma_copy(SM90_TMA_STORE{},
                                      make_tensor(make_gmem_ptr(static_cast<float*>(nullptr)), GmemLayoutC{}),
                                      SmemLayoutC{}));

  struct SharedStorage {
    cute::array_aligned<Element, cosize_v<SmemLayoutA>, 1024> a;
    cute::array_aligned<Element, cosize_v<SmemLayoutB>, 1024> b;
    cute::array_aligned<float, kSmemCFloats, 1024> c;  // one (64, kEpiCols) block per consumer warpgroup
    typename Pipeline::SharedStorage pipeline;
  };

  // Kernel parameters (passed by value as a __grid_constant__).
  struct Params {
    TmaA tma_a;
    TmaB tma_b;
    TmaC tma_c;
    bool tma_store;  // kTmaStore and C's rows are 16-byte aligned (N % 4 == 0)
    Problem problem;
    TermPlan plan;
    int k_tiles;
    TileScheduler sched;  // the output tiles' grid, made on the host (its divisors' multipliers)
  };
};

}  // namespace fused
}  // namespace jaxemu
