// The int8 x int8 -> int32 batched GEMM, assembled from CUTLASS 3's sm90
// collectives (warp-specialized TMA + wgmma mainloop, TMA epilogue,
// persistent or stream-K tile scheduler), writing the int32 sums or, with
// kResidues, their residues modulo each batch entry's modulus (uint8,
// epilogue.cuh). Included by the instantiation files ffi/int8/inst/*.cu, one
// per configuration, so that they compile in parallel.
#pragma once

#include <string>

#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "epilogue.cuh"
#include "params.h"

namespace jaxemu {
namespace int8 {

template <class TileShape, class ClusterShape, class Scheduler, bool kResidues = false>
struct Int8Gemm {
  using Acc = int32_t;
  using ElementD = std::conditional_t<kResidues, uint8_t, int32_t>;
  // A (m, k) row-major; B (n, k) row-major is CUTLASS's column-major (k, n):
  // both K-major. D (m, n) row-major. No C operand (beta = 0, nothing read).
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignAB = 16;  // elements per 16-byte TMA access
  static constexpr int kAlignD = 16 / int(sizeof(ElementD));

  // Epilogue: D = acc (alpha = 1, int32 throughout, no rounding anywhere), or
  // D = acc mod m_l (exact: ResidueNode).
  using Fusion = std::conditional_t<
      kResidues,
      cutlass::epilogue::fusion::Sm90EVT<ResidueNode, cutlass::epilogue::fusion::Sm90AccFetch>,
      cutlass::epilogue::fusion::LinearCombination<int32_t, Acc, void, Acc>>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, Acc, Acc,
      void, LayoutD, kAlignD, ElementD, LayoutD, kAlignD,
      cutlass::epilogue::TmaWarpSpecializedCooperative, Fusion>::CollectiveOp;

  // Mainloop: as many pipeline stages as shared memory holds beside the epilogue's.
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      int8_t, LayoutA, kAlignAB, int8_t, LayoutB, kAlignAB, Acc, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue, Scheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static typename Gemm::Arguments arguments(const GemmProblem& p, int sm_count) {
    const int m = int(p.m), n = int(p.n), k = int(p.k), l = int(p.batch);
    auto sa = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(m, k, l));
    auto sb = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(n, k, l));
    auto sd = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(m, n, l));
    cutlass::KernelHardwareInfo hw;
    cudaGetDevice(&hw.device_id);
    hw.sm_count = sm_count;
    ElementD* d;
    if constexpr (kResidues) d = p.r;
    else d = p.c;
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                  {m, n, k, l},
                                  {p.a, sa, p.b, sb},
                                  {{}, nullptr, sd, d, sd},
                                  hw};
    if constexpr (kResidues) {
      typename ResidueNode::Arguments node;
      for (int i = 0; i < p.nmod && i < kMaxModuli; ++i) node.moduli[i] = p.moduli[i];
      node.per_modulus = int(p.batch / p.nmod);
      args.epilogue.thread = {{}, node};  // (the accumulator fetch's arguments, the node's)
    } else {
      args.epilogue.thread.alpha = 1;
      args.epilogue.thread.beta = 0;
    }
    return args;
  }

  static size_t workspace_size(const GemmProblem& p, int sm_count) {
    return Gemm::get_workspace_size(arguments(p, sm_count));
  }

  static std::string run(const GemmProblem& p, int sm_count, void* workspace, cudaStream_t stream) {
    auto args = arguments(p, sm_count);
    Gemm gemm;
    cutlass::Status s = gemm.can_implement(args);
    if (s != cutlass::Status::kSuccess) return std::string("CUTLASS cannot run it: ") + cutlassGetStatusString(s);
    s = gemm.initialize(args, workspace, stream);
    if (s != cutlass::Status::kSuccess) return std::string("CUTLASS initialize: ") + cutlassGetStatusString(s);
    s = gemm.run(stream);
    if (s != cutlass::Status::kSuccess) return std::string("CUTLASS run: ") + cutlassGetStatusString(s);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return std::string("kernel launch: ") + cudaGetErrorString(e);
    return "";
  }
};

// The configurations (GemmConfig), instantiated one per file in inst/.
using WideGemm = Int8Gemm<cute::Shape<cute::_128, cute::_256, cute::_128>, cute::Shape<cute::_2, cute::_1, cute::_1>,
                          cutlass::gemm::PersistentScheduler>;
using StreamKGemm = Int8Gemm<cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                             cutlass::gemm::StreamKScheduler>;
using WideResidueGemm = Int8Gemm<cute::Shape<cute::_128, cute::_256, cute::_128>,
                                 cute::Shape<cute::_2, cute::_1, cute::_1>, cutlass::gemm::PersistentScheduler, true>;
using StreamKResidueGemm = Int8Gemm<cute::Shape<cute::_128, cute::_128, cute::_128>,
                                    cute::Shape<cute::_1, cute::_1, cute::_1>, cutlass::gemm::StreamKScheduler, true>;

}  // namespace int8
}  // namespace jaxemu
