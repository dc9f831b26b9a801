// Host side of the fused GEMM for one (slice type, tile width): TMA
// descriptors, kernel parameters, grid, launch. Included by the generated
// instantiation files (ffi/fused/inst/*.cu), one per configuration.
#pragma once

#include <algorithm>
#include <string>

#include <cuda_runtime.h>

#include "kernel.cuh"
#include "traits.cuh"

namespace jaxemu {
namespace fused {

template <class T>
std::string launch(const Problem& p, cudaStream_t stream, Gate gate) {
  using Element = typename T::Element;
  if (p.sa != T::kSlicesA || p.sb != T::kSlicesB) return "slice counts do not match the kernel's stages";
  TermPlan plan;
  std::string why = plan_terms(p, &plan);
  if (!why.empty()) return why;
  if (plan.ngroups > T::kPartials) return "more term weights than the kernel's partial accumulators";
  if ((plan.sub0 == 2) != T::kHalfTile)
    return T::kHalfTile ? "this kernel promotes every half K-tile (kc_sub = 2)" : "this kernel takes kc_sub = 1";
  if (T::kFixedTerms && (plan.n1 != T::kTerms1 || p.nterms - plan.n1 != T::kTerms0))
    return "term counts do not match the kernel's (" + std::to_string(T::kTerms0) + " + " +
           std::to_string(T::kTerms1) + ")";
  const int32_t m = int32_t(p.m), n = int32_t(p.n), k = int32_t(p.k), L = int32_t(p.batch);
  auto gA = make_tensor(make_gmem_ptr(static_cast<Element const*>(p.a)), T::gmem_layout(m, k, p.sa, L));
  auto gB = make_tensor(make_gmem_ptr(static_cast<Element const*>(p.b)), T::gmem_layout(n, k, p.sb, L));
  // TMA stores need 16-byte row strides; otherwise the epilogue stores from
  // registers and the descriptor (over a dummy 4-wide view of C) is unused.
  const bool tma_store = T::kTmaStore && n % 4 == 0;
  const int32_t cn = tma_store ? n : 4, cm = tma_store ? m : 1, cp = tma_store ? p.splits * L : 1;
  auto gC = make_tensor(make_gmem_ptr(p.c), make_layout(make_shape(cm, cn, cp),
                                                        make_stride(int64_t(cn), _1{}, int64_t(cm) * cn)));
  const int tiles_m = int((p.m + T::kTileM - 1) / T::kTileM), tiles_n = int((p.n + T::kTileN - 1) / T::kTileN);
  const TileScheduler sched = TileScheduler::make(tiles_m, tiles_n, L, p.splits);
  if (!sched.fits()) return "too many output tiles for one launch (" + std::to_string(sched.total()) + ", at most 2^31)";
  typename T::Params params{
      make_tma_copy(SM90_TMA_LOAD{}, gA, typename T::SmemLayoutA{}(_, _, 0),
                    make_shape(Int<T::kTileM>{}, Int<T::kTileK>{}), _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, gB, typename T::SmemLayoutB{}(_, _, 0),
                    make_shape(Int<T::kTileN>{}, Int<T::kTileK>{}), _1{}),
      make_tma_copy(SM90_TMA_STORE{}, gC, typename T::SmemLayoutC{}),
      tma_store,
      p,
      plan,
      int((p.k + T::kTileK - 1) / T::kTileK),
      sched};

  int device = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return std::string("cannot query the device: ") + cudaGetErrorString(e);

  auto kernel = fused_gemm_kernel<T>;
  // The warpgroups' setmaxnreg split (Traits) must fit the registers the CTA
  // is launched with, or the consumers' increase waits forever: refuse to
  // launch if a compiler or flag change gave the kernel fewer.
  static const int launch_regs = [&] {
    cudaFuncAttributes attr{};
    return cudaFuncGetAttributes(&attr, kernel) == cudaSuccess ? attr.numRegs : -1;
  }();
  if (128 * T::kProducerRegs + 128 * T::kConsumerWarpgroups * T::kConsumerRegs > T::kThreads * launch_regs)
    return "kernel compiled with " + std::to_string(launch_regs) + " registers per thread, fewer than its "
           "warpgroups' register split needs (ffi/fused/traits.cuh)";
  const int smem_bytes = int(sizeof(typename T::SharedStorage));
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (e != cudaSuccess) return std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(e);

  const int64_t work = sched.total();
  const int grid = int(std::min<int64_t>(work, sms));
  kernel<<<grid, T::kThreads, smem_bytes, stream>>>(params, gate);
  e = cudaGetLastError();
  if (e != cudaSuccess) return std::string("kernel launch: ") + cudaGetErrorString(e);
  return "";
}

}  // namespace fused
}  // namespace jaxemu
