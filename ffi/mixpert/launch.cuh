// Host side of the MixPert kernel for one level: TMA descriptors, kernel
// parameters, grid, launch. Included by the instantiation files
// (ffi/mixpert/inst/*.cu), one per MixPert level.
#pragma once

#include <algorithm>
#include <string>

#include <cuda_runtime.h>

#include "kernel.cuh"
#include "traits.cuh"

namespace jaxemu {
namespace mixpert {

template <class T>
std::string launch(const Problem& p, int sms, cudaStream_t stream) {  // sms: the device's SM count
  using Element = typename T::Element;
  if (p.sa != T::kSlicesA || p.sb != T::kSlicesB) return "slice counts do not match the kernel's";
  const int32_t m = int32_t(p.m), n = int32_t(p.n), k = int32_t(p.k), L = int32_t(p.batch);
  const int64_t m_pad64 = (p.m + kScaleAlign - 1) / kScaleAlign * kScaleAlign;
  const int64_t n_pad64 = (p.n + kScaleAlign - 1) / kScaleAlign * kScaleAlign;
  if (m_pad64 >= (int64_t(1) << 31) || n_pad64 >= (int64_t(1) << 31)) return "dimensions beyond 32-bit TMA coordinates";
  const int32_t m_pad = int32_t(m_pad64), n_pad = int32_t(n_pad64);
  auto gA = make_tensor(make_gmem_ptr(p.a), T::gmem_layout(m, k, p.sa, L));
  auto gB = make_tensor(make_gmem_ptr(p.b), T::gmem_layout(n, k, p.sb, L));
  auto gSA = make_tensor(make_gmem_ptr(p.scale_a), T::scale_layout(m_pad, k, L));
  auto gSB = make_tensor(make_gmem_ptr(p.scale_b), T::scale_layout(n_pad, k, L));
  const int tiles_m = int((p.m + T::kTileM - 1) / T::kTileM), tiles_n = int((p.n + T::kTileN - 1) / T::kTileN);
  const fused::TileScheduler sched = fused::TileScheduler::make(tiles_m, tiles_n, L, p.splits);
  if (!sched.fits()) return "too many output tiles for one launch (" + std::to_string(sched.total()) + ", at most 2^31)";
  fused::Problem fp;  // what the fused kernels' epilogue reads
  fp.c = p.c;
  fp.m = p.m;
  fp.n = p.n;
  fp.k = p.k;
  fp.batch = p.batch;
  fp.splits = p.splits;
  typename T::Params params{
      make_tma_copy(SM90_TMA_LOAD{}, gA, typename T::SmemLayoutA{}(_, _, 0),
                    make_shape(Int<T::kTileM>{}, Int<T::kTileK>{}), _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, gB, typename T::SmemLayoutB{}(_, _, 0),
                    make_shape(Int<T::kTileN>{}, Int<T::kTileK>{}), _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, gSA, typename T::SmemLayoutSA{}(_, _, 0)),
      make_tma_copy(SM90_TMA_LOAD{}, gSB, typename T::SmemLayoutSB{}(_, _, 0)),
      false,
      fp,
      m_pad,
      n_pad,
      int(p.k / T::kTileK),
      sched};

  auto kernel = mixpert_kernel<T>;
  static const int launch_regs = [&] {
    cudaFuncAttributes attr{};
    return cudaFuncGetAttributes(&attr, kernel) == cudaSuccess ? attr.numRegs : -1;
  }();
  if (128 * T::kProducerRegs + 128 * T::kConsumerWarpgroups * T::kConsumerRegs > T::kThreads * launch_regs)
    return "kernel compiled with " + std::to_string(launch_regs) + " registers per thread, fewer than its "
           "warpgroups' register split needs (ffi/mixpert/traits.cuh)";
  const int smem_bytes = int(sizeof(typename T::SharedStorage));
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (e != cudaSuccess) return std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(e);

  const int grid = int(std::min<int64_t>(sched.total(), sms));
  kernel<<<grid, T::kThreads, smem_bytes, stream>>>(params);
  e = cudaGetLastError();
  if (e != cudaSuccess) return std::string("kernel launch: ") + cudaGetErrorString(e);
  return "";
}

}  // namespace mixpert
}  // namespace jaxemu
