// The fused emulation GEMM kernel (sm_90a): one launch per emulated product.
//
// Warp-specialized and persistent: warpgroup 0 produces (one thread issues TMA
// loads of every slice of each K-tile), warpgroups 1-2 consume (wgmma,
// promotion, epilogue).
// Each CTA walks the work items the TileScheduler assigns to it; the producer
// runs ahead by up to kStages K-tiles, also across work items, so the next
// tile's loads overlap the current tile's epilogue.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/arch/reg_reconfig.h"
#include "cutlass/cutlass.h"
#include "cutlass/pipeline/sm90_pipeline.hpp"

#include "../common/gate.h"
#include "epilogue.cuh"
#include "mainloop.cuh"
#include "scheduler.cuh"
#include "traits.cuh"

namespace jaxemu {
namespace fused {

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) fused_gemm_kernel(CUTE_GRID_CONSTANT typename T::Params const params,
                                                                    const Gate gate) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (gate_closed(gate)) return;  // (common/gate.h: the whole grid alike, before any barrier)
  using Pipeline = typename T::Pipeline;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& smem = *reinterpret_cast<typename T::SharedStorage*>(smem_raw);

  const int warpgroup = cutlass::canonical_warp_group_idx();
  typename Pipeline::Params pp;
  pp.transaction_bytes = T::kTmaBytesPerStage;
  pp.role = warpgroup == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  pp.is_leader = threadIdx.x == 0;
  pp.num_consumers = 128 * T::kConsumerWarpgroups;
  Pipeline pipeline(smem.pipeline, pp, Shape<_1, _1, _1>{});
  if (threadIdx.x == 0) {
    cute::prefetch_tma_descriptor(params.tma_a.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_b.get_tma_descriptor());
  }
  __syncthreads();  // barriers initialised before anyone waits on them

  const TileScheduler& sched = params.sched;
  const int64_t total = sched.total();

  if (warpgroup == 0) {
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegs>();
    if (threadIdx.x == 0) {
      auto write = cutlass::make_producer_start_state<Pipeline>();
      for (int64_t idx = blockIdx.x; idx < total; idx += gridDim.x) {
        Mainloop<T>::load(params, pipeline, write, smem, sched.get(idx));
      }
      pipeline.producer_tail(write);  // every stage consumed before the CTA exits
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegs>();
    typename T::TiledMma tiled_mma;
    auto thr_mma = tiled_mma.get_thread_slice(threadIdx.x - 128);
    Tensor total_acc = partition_fragment_C(tiled_mma, Shape<Int<T::kTileM>, Int<T::kTileN>>{});
    Tensor coords = thr_mma.partition_C(make_identity_tensor(Shape<Int<T::kTileM>, Int<T::kTileN>>{}));
    typename T::PipelineState read;
    for (int64_t idx = blockIdx.x; idx < total; idx += gridDim.x) {
      const WorkTile w = sched.get(idx);
      Epilogue<T>::prefetch_exponents(params.problem, w);
      Mainloop<T>::mma(params, pipeline, read, smem, w, tiled_mma, thr_mma, total_acc);
      Epilogue<T>::store(params, w, total_acc, coords);
    }
    Epilogue<T>::finish();
  }
#endif
}

}  // namespace fused
}  // namespace jaxemu
