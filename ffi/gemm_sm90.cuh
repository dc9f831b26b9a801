// The sm90 (Hopper) GEMM with promotion, built from CUTLASS 3 collectives.
//
// CUTLASS's FP8 mainloop (MainloopSm90TmaGmmaWarpSpecializedFP8) implements
// exactly the promotion we need: wgmma accumulates into a temporary, which is
// added to the main FP32 accumulator every `mma_promotion_interval` MMA
// instructions. Its CollectiveBuilder only selects it for FP8 inputs, but the
// collective itself is generic, so we name it explicitly for bf16 / fp16 /
// tf32 operands and take the remaining pieces (tiled MMA, smem layouts, TMA
// copies) from the builder's ordinary choice for the same types.
//
// Tiles: two consumer warpgroups hold both the wgmma accumulator and the
// promoted one, so a 128 x N tile costs 2 x N/2 x 2 registers per thread; N = 192
// is the widest without spills. Measured on an H200 (scripts/gemm_variants.cu,
// bf16, 8192 x 8192 x 49152, promotion every 128 K-steps): 128x128 cluster 1x1
// 454 TFLOP/s, 128x128 2x1 476, 128x192 1x1 492, 128x192 2x1 526.
#pragma once

#include <string>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "gemm.h"

namespace jaxemu {
namespace sm90 {

using namespace cute;

template <class Element, int TileK, int TileN = 192, int ClusterM = 2>
struct PromotedGemm {
  using LayoutA = cutlass::layout::RowMajor;     // A (M, K), K contiguous
  using LayoutB = cutlass::layout::ColumnMajor;  // B (K, N) stored as (N, K), K contiguous
  using LayoutC = cutlass::layout::RowMajor;
  static constexpr int kAlignAB = 16 / sizeof(Element);
  static constexpr int kAlignC = 4;  // 16 bytes of float

  using TileShape = Shape<_128, Int<TileN>, Int<TileK>>;
  using ClusterShape = Shape<Int<ClusterM>, _1, _1>;
  using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      float, LayoutC, kAlignC, float, LayoutC, kAlignC, EpilogueSchedule>::CollectiveOp;

  using Builder = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, kAlignAB, Element, LayoutB,
      kAlignAB, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;

  using Mainloop = cutlass::gemm::collective::CollectiveMma<
      cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<Builder::DispatchPolicy::Stages, ClusterShape,
                                                           KernelSchedule>,
      TileShape, Element, typename Builder::StrideA, Element, typename Builder::StrideB,
      typename Builder::TiledMma, typename Builder::GmemTiledCopyA, typename Builder::SmemLayoutAtomA,
      typename Builder::SmemCopyAtomA, typename Builder::TransformA, typename Builder::GmemTiledCopyB,
      typename Builder::SmemLayoutAtomB, typename Builder::SmemCopyAtomB, typename Builder::TransformB>;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  // K-steps per wgmma instruction of the tiled MMA.
  static constexpr int kMmaK = decltype(size<2>(typename Builder::TiledMma::AtomShape_MNK{}))::value;
  static constexpr int kMmasPerTile = TileK / kMmaK;

  static typename Gemm::Arguments arguments(const GemmProblem& p) {
    using StrideA = typename Gemm::GemmKernel::StrideA;
    using StrideB = typename Gemm::GemmKernel::StrideB;
    using StrideC = typename Gemm::GemmKernel::StrideC;
    using StrideD = typename Gemm::GemmKernel::StrideD;
    int m = int(p.m), n = int(p.n), k = int(p.k), l = int(p.batch);
    auto sa = cutlass::make_cute_packed_stride(StrideA{}, make_shape(m, k, l));
    auto sb = cutlass::make_cute_packed_stride(StrideB{}, make_shape(n, k, l));
    auto sc = cutlass::make_cute_packed_stride(StrideC{}, make_shape(m, n, l));
    auto sd = cutlass::make_cute_packed_stride(StrideD{}, make_shape(m, n, l));
    // Promotion interval in MMA instructions; "never" = once per K.
    int64_t steps = p.promote_k > 0 ? p.promote_k : p.k;
    uint32_t interval = uint32_t(std::max<int64_t>(kMmasPerTile, (steps / TileK) * kMmasPerTile));
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, l},
        {static_cast<Element const*>(p.a), sa, static_cast<Element const*>(p.b), sb, interval},
        {{p.alpha, p.beta}, p.beta != 0.0f ? p.c : p.d, sc, p.d, sd}};
    return args;
  }

  static size_t workspace(const GemmProblem& p) { return Gemm::get_workspace_size(arguments(p)); }

  static std::string check(const GemmProblem& p) {
    auto args = arguments(p);
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess) return "CUTLASS cannot implement this problem";
    return "";
  }

  static std::string run(const GemmProblem& p, void* ws, cudaStream_t stream) {
    Gemm gemm;
    auto args = arguments(p);
    cutlass::Status st = gemm.can_implement(args);
    if (st != cutlass::Status::kSuccess) return std::string("CUTLASS can_implement: ") + cutlassGetStatusString(st);
    st = gemm.initialize(args, ws, stream);
    if (st != cutlass::Status::kSuccess) return std::string("CUTLASS initialize: ") + cutlassGetStatusString(st);
    st = gemm.run(stream);
    if (st != cutlass::Status::kSuccess) return std::string("CUTLASS run: ") + cutlassGetStatusString(st);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return std::string("CUDA launch: ") + cudaGetErrorString(e);
    return "";
  }
};

}  // namespace sm90
}  // namespace jaxemu
