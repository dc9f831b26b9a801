// The fused GEMM on FP32 operands (traits_f32.cuh), and its host side: one
// launch of the GEMM, one of the split-K sum when there are K-splits, one of
// the special-value fix-up (a few microseconds when there is nothing to fix).
#pragma once

#include <algorithm>
#include <string>

#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/arch/reg_reconfig.h"
#include "cutlass/cutlass.h"
#include "cutlass/pipeline/sm90_pipeline.hpp"

#include "epilogue.cuh"
#include "f32_special.cuh"
#include "mainloop_f32.cuh"
#include "scheduler.cuh"
#include "traits_f32.cuh"

namespace jaxemu {
namespace fused {

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) fused_f32_kernel(CUTE_GRID_CONSTANT typename T::Params const params) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
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
  __syncthreads();

  const TileScheduler& sched = params.sched;
  const int64_t total = sched.total();
  if (warpgroup == 0) {
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegs>();
    if (threadIdx.x == 0) {
      auto write = cutlass::make_producer_start_state<Pipeline>();
      for (int64_t idx = blockIdx.x; idx < total; idx += gridDim.x)
        MainloopF32<T>::load(params, pipeline, write, smem, sched.get(idx));
      pipeline.producer_tail(write);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegs>();
    typename T::TiledMma tiled_mma;
    auto thr_mma = tiled_mma.get_thread_slice(threadIdx.x - 128);
    Tensor total_acc = partition_fragment_C(tiled_mma, Shape<Int<T::kTileM>, Int<T::kTileN>>{});
    Tensor coords = thr_mma.partition_C(make_identity_tensor(Shape<Int<T::kTileM>, Int<T::kTileN>>{}));
    typename T::PipelineState read;
    const typename Transform<T>::Offsets offsets = Transform<T>::offsets(smem);
    bool bad = false;
    for (int64_t idx = blockIdx.x; idx < total; idx += gridDim.x) {
      const WorkTile w = sched.get(idx);
      if constexpr (T::kRegisterA)
        MainloopF32<T>::mma_rs(params, pipeline, read, smem, w, tiled_mma, thr_mma, offsets, total_acc);
      else
        MainloopF32<T>::mma(params, pipeline, read, smem, w, tiled_mma, thr_mma, offsets, total_acc);
      Epilogue<T>::store(params, w, total_acc, coords);
      if (params.problem.splits == 1) {  // (with K-splits the sum is checked: reduce_splits_kernel)
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(total_acc); ++i) bad |= not_finite(total_acc(i));
      }
    }
    raise_if(bad, params.f32.flags);
  }
#endif
}

template <class T>
std::string launch_f32(const Problem& p, const SplitProblem& cut, const SplitF32& f32, cudaStream_t stream) {
  // Reached through run_f32 only, after check_f32 (ffi/fused_dispatch.cu: the
  // cut's type, which picks this configuration, and row exponents exactly
  // for fp16; K and N multiples of 4, the buffers, 1 <= splits <= K-tiles,
  // which the consumers rely on: each split cuts a K-tile before its loop);
  // here, what this configuration adds.
  if (p.sa != T::kSlicesA || p.sb != T::kSlicesB) return "slice counts do not match the kernel's";
  TermPlan plan;
  std::string why = plan_terms(p, &plan);
  if (!why.empty()) return why;
  if (plan.sub0 != 1) return "the FP32-operand kernel promotes at whole K-tiles only (kc_sub = 1)";
  if (plan.ngroups != T::kPartials || plan.n1 != T::kTerms1 || p.nterms != T::kTerms0 + T::kTerms1)
    return "the kernel takes " + std::to_string(T::kTerms1) + " terms of the smaller weight, then " +
           std::to_string(T::kTerms0) + " of the larger";
  if constexpr (T::kRegisterA) {  // its terms are compiled in (traits_f32.cuh: f32_term_pair)
    for (int t = 0; t < p.nterms; ++t)
      if (p.term_a[t] != T::term_a(t) || p.term_b[t] != T::term_b(t))
        return "term " + std::to_string(t) + " is not the configuration's (ffi/fused/traits_f32.cuh: f32_term_pair)";
  }
  const int32_t m = int32_t(p.m), n = int32_t(p.n), k = int32_t(p.k), L = int32_t(p.batch);
  auto gA = make_tensor(make_gmem_ptr(static_cast<float const*>(p.a)), T::gmem_layout_a(m, k, L));
  auto gB = make_tensor(make_gmem_ptr(static_cast<float const*>(p.b)), T::gmem_layout_b(n, k, L));
  const int tiles_m = int((p.m + T::kTileM - 1) / T::kTileM), tiles_n = int((p.n + T::kTileN - 1) / T::kTileN);
  const TileScheduler sched = TileScheduler::make(tiles_m, tiles_n, L, p.splits);
  if (!sched.fits()) return "too many output tiles for one launch";
  Problem gemm = p;
  if (p.splits > 1) gemm.c = f32.partials;
  typename T::Params params{
      make_tma_copy(SM90_TMA_LOAD{}, gA, typename T::SmemTileA32{}, make_shape(Int<T::kTileM>{}, Int<T::kTileK>{}), _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, gB, typename T::SmemTileB32{}, make_shape(Int<T::kTileN>{}, Int<T::kTileK>{}), _1{}),
      gemm,
      plan,
      int((p.k + T::kTileK - 1) / T::kTileK),
      sched,
      cut,
      f32};

  int device = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return std::string("cannot query the device: ") + cudaGetErrorString(e);
  auto kernel = fused_f32_kernel<T>;
  static const int launch_regs = [&] {
    cudaFuncAttributes attr{};
    return cudaFuncGetAttributes(&attr, kernel) == cudaSuccess ? attr.numRegs : -1;
  }();
  if (128 * T::kProducerRegs + 128 * T::kConsumerWarpgroups * T::kConsumerRegs > T::kThreads * launch_regs)
    return "kernel compiled with " + std::to_string(launch_regs) + " registers per thread, fewer than its "
           "warpgroups' register split needs (ffi/fused/traits_f32.cuh)";
  const int smem_bytes = int(sizeof(typename T::SharedStorage));
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (e != cudaSuccess) return std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(e);

  e = cudaMemsetAsync(f32.flags, 0, sizeof(int32_t), stream);
  if (e != cudaSuccess) return std::string("flag reset: ") + cudaGetErrorString(e);
  kernel<<<int(std::min<int64_t>(sched.total(), sms)), T::kThreads, smem_bytes, stream>>>(params);
  e = cudaGetLastError();
  if (e != cudaSuccess) return std::string("kernel launch: ") + cudaGetErrorString(e);
  return finish_f32(p, f32, sms, stream);
}

}  // namespace fused
}  // namespace jaxemu
