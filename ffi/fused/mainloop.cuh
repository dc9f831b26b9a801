// Mainloop of the fused GEMM: a producer thread streams slice tiles through a
// TMA pipeline; two consumer warpgroups multiply them on the tensor cores and
// promote partial sums into FP32.
//
// Per chunk (a run of K-tiles of one term), the wgmma instructions accumulate
// into a partial accumulator, which starts from zero; after the chunk it is
// added to `total` as total = fma(partial, 2^e_t, total): the term weight is
// an exact power of two, so this is one round-to-nearest FP32 addition.
// Keeping one wgmma batch in flight overlaps the tensor cores with the
// pipeline's release.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/pipeline/sm90_pipeline.hpp"

#include "scheduler.cuh"
#include "traits.cuh"

namespace jaxemu {
namespace fused {

template <class T>
struct Mainloop {
  using Element = typename T::Element;
  using Pipeline = typename T::Pipeline;
  using PipelineState = typename T::PipelineState;
  static constexpr int TM = T::kTileM, TN = T::kTileN, TK = T::kTileK;

  // Producer: one thread issues the TMA loads of every K-tile of every chunk.
  static __device__ void load(typename T::Params const& params, Pipeline& pipeline, PipelineState& write,
                              typename T::SharedStorage& smem, WorkTile const& w) {
    const Problem& p = params.problem;
    const int L = int(p.batch);
    Tensor mA = params.tma_a.get_tma_tensor(T::gmem_shape(int(p.m), int(p.k), p.sa, L));
    Tensor mB = params.tma_b.get_tma_tensor(T::gmem_shape(int(p.n), int(p.k), p.sb, L));
    Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename T::SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename T::SmemLayoutB{});
    auto tma_a = params.tma_a.get_slice(0);
    auto tma_b = params.tma_b.get_slice(0);
    Tensor tAsA = tma_a.partition_D(sA);  // (TMA, TMA_M, TMA_K, stage)
    Tensor tBsB = tma_b.partition_D(sB);
    for (ChunkIter it(p, params.k_tiles, w.split); !it.done(); it.next()) {
      Tensor gA = local_tile(mA(_, _, make_coord(p.term_a[it.term], w.l)), Shape<Int<TM>, Int<TK>>{},
                             make_coord(w.m_blk, _));  // (TM, TK, k-tile)
      Tensor gB = local_tile(mB(_, _, make_coord(p.term_b[it.term], w.l)), Shape<Int<TN>, Int<TK>>{},
                             make_coord(w.n_blk, _));
      Tensor tAgA = tma_a.partition_S(gA);  // (TMA, TMA_M, TMA_K, k-tile)
      Tensor tBgB = tma_b.partition_S(gB);
      for (int kt = it.kt_begin; kt < it.kt_end; ++kt) {
        pipeline.producer_acquire(write);
        auto* bar = pipeline.producer_get_barrier(write);
        copy(params.tma_a.with(*bar, 0), tAgA(_, _, _, kt), tAsA(_, _, _, write.index()));
        copy(params.tma_b.with(*bar, 0), tBgB(_, _, _, kt), tBsB(_, _, _, write.index()));
        ++write;
      }
    }
  }

  // One K-tile of wgmma from pipeline stage `stage` into `acc` (from zero when `first`).
  template <class Acc, class FragA, class FragB>
  static __device__ void issue(typename T::TiledMma& tiled_mma, FragA const& tCrA, FragB const& tCrB, int stage,
                               Acc& acc, bool first) {
    warpgroup_fence_operand(acc);
    warpgroup_arrive();
    tiled_mma.accumulate_ = first ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
    CUTLASS_PRAGMA_UNROLL
    for (int kb = 0; kb < size<2>(tCrA); ++kb) {
      cute::gemm(tiled_mma, tCrA(_, _, kb, stage), tCrB(_, _, kb, stage), acc);
      tiled_mma.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
  }

  // Promotion: one round-to-nearest FP32 add per element and chunk.
  template <class Accum>
  static __device__ void promote(Accum& total, Accum& partial, float weight) {
    warpgroup_fence_operand(partial);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(total); ++i) total(i) = fmaf(partial(i), weight, total(i));
  }

  // Consumers: the whole K-loop of one work item into `total` (FP32). Each
  // chunk ends by draining the wgmma pipeline, then promotes. (Overlapping the
  // promotion with the next chunk's wgmma needs a second partial
  // accumulator: tried for 128-wide tiles, ptxas serialized the wgmma
  // (warning C7514) and spilled: docs/performance.md.)
  template <class Accum, class ThrMma>
  static __device__ void mma(typename T::Params const& params, Pipeline& pipeline, PipelineState& read,
                             typename T::SharedStorage& smem, WorkTile const& w, typename T::TiledMma& tiled_mma,
                             ThrMma const& thr_mma, Accum& total) {
    const Problem& p = params.problem;
    Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename T::SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename T::SmemLayoutB{});
    Tensor tCsA = thr_mma.partition_A(sA);  // (MMA, MMA_M, MMA_K, stage)
    Tensor tCsB = thr_mma.partition_B(sB);
    Tensor tCrA = thr_mma.make_fragment_A(tCsA);  // smem descriptors
    Tensor tCrB = thr_mma.make_fragment_B(tCsB);
    clear(total);
    Tensor partial = make_fragment_like(total);
    for (ChunkIter it(p, params.k_tiles, w.split); !it.done(); it.next()) {
      const float weight = __int_as_float((p.term_exp[it.term] + 127) << 23);  // 2^e_t, |e_t| <= 126
      PipelineState release = read;
      const int n = it.kt_end - it.kt_begin;
      for (int i = 0; i < n; ++i) {
        pipeline.consumer_wait(read);
        issue(tiled_mma, tCrA, tCrB, read.index(), partial, i == 0);
        warpgroup_wait<1>();  // the previous K-tile's wgmma is done: release its stage
        warpgroup_fence_operand(partial);
        if (i > 0) {
          pipeline.consumer_release(release);
          ++release;
        }
        ++read;
      }
      warpgroup_wait<0>();
      pipeline.consumer_release(release);
      promote(total, partial, weight);
    }
  }
};

}  // namespace fused
}  // namespace jaxemu
