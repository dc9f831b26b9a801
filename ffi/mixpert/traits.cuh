// Compile-time configuration of the MixPert kernel (params.h): tile shape,
// shared-memory layouts, the int8 wgmma, the pipeline, and the level
// structure of MixPert level (SA - 1, SB - 1).
#pragma once

#include "cute/tensor.hpp"
#include "cute/atom/mma_atom.hpp"
#include "cute/atom/copy_traits_sm90_tma.hpp"
#include "cute/arch/mma_sm90.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/pipeline/sm90_pipeline.hpp"

#include "../fused/params.h"
#include "../fused/scheduler.cuh"
#include "../fused/traits.cuh"
#include "params.h"

namespace jaxemu {
namespace mixpert {

using namespace cute;

template <int SlicesA_, int SlicesB_, int TileN_ = mixpert::kTileN, int ConsumerWarpgroups_ = 2>
struct Traits {
  using Element = int8_t;
  // Consumer warpgroups of 64 rows each. Each waits for its K-tile's
  // products before it folds them (mainloop.cuh): a third warpgroup gives
  // the schedulers another warp to issue from meanwhile, at 152 registers
  // per consumer thread instead of 232.
  static constexpr int kConsumerWarpgroups = ConsumerWarpgroups_;
  static_assert(kConsumerWarpgroups == 2 || kConsumerWarpgroups == 3, "two or three consumer warpgroups");
  static constexpr int kTileM = kWarpgroupRows * kConsumerWarpgroups;
  static constexpr int kTileN = TileN_;
  static constexpr int kTileK = mixpert::kTileK;
  static constexpr int kSlicesA = SlicesA_;
  static constexpr int kSlicesB = SlicesB_;
  // Levels: products (i, j), i < SA, j < SB, with i + j <= max(SA, SB) - 1
  // (jaxemu/schemes.py: Int8Split.products); level L = i + j weighs
  // 2^-(12 + 7 L) relative to the tile exponents.
  static constexpr int kLevels = kSlicesA > kSlicesB ? kSlicesA : kSlicesB;
  static_assert(kSlicesA >= 2 && kSlicesA <= 3 && kSlicesB >= 2 && kSlicesB <= 3, "MixPert levels I-IV");
  static constexpr int kKTiles = kTileK / kScaleTile;  // MixPert K-tiles per stage (4)
  static constexpr int kThreads = 128 * (1 + kConsumerWarpgroups);
  // setmaxnreg: the producer keeps 40 registers, the consumers share the
  // rest of the SM's 64K (multiples of 8).
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = kConsumerWarpgroups == 2 ? 232 : 152;
  static_assert(128 * kProducerRegs + 128 * kConsumerWarpgroups * kConsumerRegs <= 65536,
                "setmaxnreg beyond the SM's registers");
  // Registers per consumer thread: the FP32 total and one int32 accumulator
  // per level, TileN / 2 values each (a 64 x TileN wgmma tile per
  // warpgroup), and ~24 for addresses, scale factors and loop state.
  static_assert((kLevels + 1) * kTileN / 2 + 24 <= kConsumerRegs,
                "accumulators beyond the consumers' register budget");
  // C is stored from registers (fused/epilogue.cuh); all shared memory is pipeline.
  static constexpr bool kTmaStore = false;

  // A stage: every slice of A's and B's 128-step K-tile, and the scale
  // factors of their four MixPert tiles.
  static constexpr int kStageBytes = (kSlicesA * kTileM + kSlicesB * kTileN) * kTileK + (kTileM + kTileN) * kKTiles * 4;
  static constexpr int kStages = (227 * 1024 - 1024) / kStageBytes;
  static_assert(kStages >= 2, "tile too large for a pipeline");

  using TileShape = Shape<Int<kTileM>, Int<kTileN>, Int<kTileK>>;
  using SmemAtom = GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutA =
      decltype(tile_to_shape(SmemAtom{}, make_shape(Int<kTileM>{}, Int<kTileK>{}, Int<kSlicesA * kStages>{})));
  using SmemLayoutB =
      decltype(tile_to_shape(SmemAtom{}, make_shape(Int<kTileN>{}, Int<kTileK>{}, Int<kSlicesB * kStages>{})));
  // Scale factors: (rows, MixPert K-tile, stage), rows contiguous (as in global memory).
  using SmemLayoutSA = Layout<Shape<Int<kTileM>, Int<kKTiles>, Int<kStages>>>;
  using SmemLayoutSB = Layout<Shape<Int<kTileN>, Int<kKTiles>, Int<kStages>>>;

  // wgmma 64 x TileN x 32, int8 x int8 -> int32 (exact), both operands
  // K-major in shared memory; the consumer warpgroups split the tile's rows.
  using MmaAtom = decltype(GMMA::ss_op_selector<Element, Element, int32_t, TileShape>());
  // One wgmma per warpgroup and slice product: N = 48 (and other widths
  // that are not a multiple of 64 or 32) needs CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
  // defined before CuTe's headers, or CuTe splits it into narrower ones.
  static_assert(decltype(size<1>(typename MMA_Traits<MmaAtom>::Shape_MNK{}))::value == kTileN,
                "the tile's width is not one wgmma: define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED");
  using TiledMma = decltype(make_tiled_mma(MmaAtom{}, Layout<Shape<Int<kConsumerWarpgroups>, _1, _1>>{}));

  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  using PipelineState = typename Pipeline::PipelineState;

  // Global slices, in the fused kernels' layout (ffi/fused/traits.cuh: SliceGmem).
  using Gmem = fused::SliceGmem<Element, kTileK>;
  using GmemTensor = typename Gmem::Tensor;
  static CUTLASS_HOST_DEVICE auto gmem_shape(int32_t rows, int32_t k, int32_t slices, int32_t batch) {
    return Gmem::shape(rows, k, slices, batch);
  }
  static CUTLASS_HOST_DEVICE auto gmem_layout(int32_t rows, int32_t k, int32_t slices, int32_t batch) {
    return Gmem::layout(rows, k, slices, batch);
  }
  // Global scale factors: (rows_padded, K / 32, L), rows contiguous.
  using ScaleLayout = Layout<Shape<int32_t, int32_t, int32_t>, Stride<_1, int64_t, int64_t>>;
  using ScaleTensor = decltype(make_tensor(make_gmem_ptr(static_cast<float const*>(nullptr)), ScaleLayout{}));
  static CUTLASS_HOST_DEVICE auto scale_shape(int32_t rows_padded, int32_t k, int32_t batch) {
    return make_shape(rows_padded, k / kScaleTile, batch);
  }
  static CUTLASS_HOST_DEVICE ScaleLayout scale_layout(int32_t rows_padded, int32_t k, int32_t batch) {
    return make_layout(scale_shape(rows_padded, k, batch),
                       make_stride(_1{}, int64_t(rows_padded), int64_t(rows_padded) * (k / kScaleTile)));
  }

  using TmaA = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutA{}(_, _, 0),
                                      make_shape(Int<kTileM>{}, Int<kTileK>{}), _1{}));
  using TmaB = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutB{}(_, _, 0),
                                      make_shape(Int<kTileN>{}, Int<kTileK>{}), _1{}));
  using TmaSA = decltype(make_tma_copy(SM90_TMA_LOAD{}, ScaleTensor{}, SmemLayoutSA{}(_, _, 0)));
  using TmaSB = decltype(make_tma_copy(SM90_TMA_LOAD{}, ScaleTensor{}, SmemLayoutSB{}(_, _, 0)));
  static constexpr uint32_t kTmaBytesPerStage = uint32_t(kStageBytes);

  struct SharedStorage {
    cute::array_aligned<Element, cosize_v<SmemLayoutA>, 1024> a;
    cute::array_aligned<Element, cosize_v<SmemLayoutB>, 1024> b;
    cute::array_aligned<float, cosize_v<SmemLayoutSA>, 128> scale_a;
    cute::array_aligned<float, cosize_v<SmemLayoutSB>, 128> scale_b;
    typename Pipeline::SharedStorage pipeline;
  };
  static_assert(sizeof(SharedStorage) <= 227 * 1024, "stages beyond shared memory (alignment and barriers included)");

  // Kernel parameters (a __grid_constant__). `problem` is in the fused
  // kernels' form for their epilogue (ffi/fused/epilogue.cuh: C, its shape
  // and K-splits; no row/column exponents).
  struct Params {
    TmaA tma_a;
    TmaB tma_b;
    TmaSA tma_sa;
    TmaSB tma_sb;
    bool tma_store;  // false: C from registers
    fused::Problem problem;
    int32_t m_pad, n_pad;  // scale_a / scale_b row lengths
    int k_tiles;           // stages of K (K / kTileK)
    fused::TileScheduler sched;
  };
};

}  // namespace mixpert
}  // namespace jaxemu
