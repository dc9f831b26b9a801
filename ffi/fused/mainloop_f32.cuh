// Mainloop of the FP32-operand fused GEMM (traits_f32.cuh): the producer
// thread streams FP32 K-tiles of A and B; the consumers cut each into slice
// tiles (transform.cuh) and multiply them.
//
// One step per K-tile t, in both consumer warpgroups:
//   issue every term's wgmma on slice buffer t % 2 (one group);
//   cut K-tile t + 1's FP32 stage into buffer (t + 1) % 2 while they run,
//   release that stage to the producer;
//   wait for the wgmma (wait_group 0), then a barrier of both warpgroups:
//   buffer (t + 1) % 2 is whole (each warpgroup cut half of B) and no wgmma
//   reads buffer t % 2 any more, which step t + 1 overwrites.
// Nothing is in flight across the loop's back edge, the order in which ptxas
// lets CUDA-core work run beside wgmma without serializing them
// (scripts/wgmma_overlap.cu, ORDER 1; docs/performance.md stop 31). The
// promotion of the partial into the FP32 total follows the chunks of
// mainloop.cuh (KChunks, TermPlan). With one group (bf16: every term
// weighs 2^0) the backend asks for one K-tile per chunk
// (cuda_fused.f32_product): since every term runs in every K-tile, a longer
// chunk would add the next tile's small terms onto hi*hi's partial and
// truncate them at its scale (2x the slice path's error on bf16x6,
// docs/performance.md stop 33). With two (fp16x3: the corrections in p1,
// hi*hi in p0, as the slice kernel keeps them) each partial holds one
// weight's terms and the scheme's chunks apply.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/pipeline/sm90_pipeline.hpp"

#include "mainloop.cuh"  // term, promote: the same wgmma and promotion
#include "scheduler.cuh"
#include "traits_f32.cuh"
#include "transform.cuh"

namespace jaxemu {
namespace fused {

template <class T>
struct MainloopF32 {
  using Pipeline = typename T::Pipeline;
  using PipelineState = typename T::PipelineState;
  static constexpr int TM = T::kTileM, TN = T::kTileN, TK = T::kTileK, SA = T::kSlicesA, SB = T::kSlicesB;
  // The consumers' barrier between steps (ids 1 and 2 are the TMA-store
  // epilogue's, per warpgroup, in kernels that have one).
  static constexpr uint32_t kStepBarrier = 3;

  // Producer: one thread, one FP32 box of A and one of B per K-tile of the
  // work item's K range (TMA fills rows, columns and K past the ends with 0).
  static __device__ __forceinline__ void load(typename T::Params const& params, Pipeline& pipeline, PipelineState& write,
                              typename T::SharedStorage& smem, WorkTile const& w) {
    const Problem& p = params.problem;
    Tensor mA = params.tma_a.get_tma_tensor(make_shape(int(p.m), int(p.k), int(p.batch)));  // (M, K, L)
    Tensor mB = params.tma_b.get_tma_tensor(make_shape(int(p.n), int(p.k), int(p.batch)));  // (N, K, L)
    Tensor gA = local_tile(mA(_, _, w.l), Shape<Int<TM>, Int<TK>>{}, make_coord(w.m_blk, _));  // (TM, TK, k-tile)
    Tensor gB = local_tile(mB(_, _, w.l), Shape<Int<TN>, Int<TK>>{}, make_coord(w.n_blk, _));  // (TN, TK, k-tile)
    Tensor sA = make_tensor(make_smem_ptr(smem.a32.data()), typename T::SmemLayoutA32{});     // (TM, TK, stage)
    Tensor sB = make_tensor(make_smem_ptr(smem.b32.data()), typename T::SmemLayoutB32{});
    auto tma_a = params.tma_a.get_slice(0);
    auto tma_b = params.tma_b.get_slice(0);
    Tensor tAgA = tma_a.partition_S(gA);  // (TMA, TMA_M, TMA_K, k-tile)
    Tensor tAsA = tma_a.partition_D(sA);  // (TMA, TMA_M, TMA_K, stage)
    Tensor tBgB = tma_b.partition_S(gB);
    Tensor tBsB = tma_b.partition_D(sB);
    const KChunks range(params.plan, params.k_tiles, w.split, p.splits);
    for (int kt = range.kb; kt < range.ke; ++kt) {
      pipeline.producer_acquire(write);
      auto* bar = pipeline.producer_get_barrier(write);
      copy(params.tma_a.with(*bar, 0), tAgA(_, _, _, kt), tAsA(_, _, _, write.index()));
      copy(params.tma_b.with(*bar, 0), tBgB(_, _, _, kt), tBsB(_, _, _, write.index()));
      ++write;
    }
  }

  // Wait for the FP32 stage at `read`, cut it into slice buffer `buf`, give
  // the stage back, and make the slices visible to the tensor cores' reads.
  static __device__ __forceinline__ void cut(typename T::Params const& params, Pipeline& pipeline, PipelineState& read,
                             typename T::SharedStorage& smem, typename Transform<T>::Offsets const& o,
                             typename Transform<T>::Scales& sc, int buf) {
    pipeline.consumer_wait(read);
    Transform<T>::run(params.cut, smem, o, read.index(), buf, sc, params.problem.exp_headroom);
    pipeline.consumer_release(read);
    ++read;
    cutlass::arch::fence_view_async_shared();  // generic-proxy stores, read by wgmma (async proxy)
  }

  static __device__ __forceinline__ void step_barrier() { cutlass::arch::NamedBarrier::sync(128 * T::kConsumerWarpgroups, kStepBarrier); }

  // Consumers: the whole K-loop of one work item into `total` (FP32).
  template <class Accum, class ThrMma>
  static __device__ __forceinline__ void mma(typename T::Params const& params, Pipeline& pipeline, PipelineState& read,
                             typename T::SharedStorage& smem, WorkTile const& w, typename T::TiledMma& tiled_mma,
                             ThrMma const& thr_mma, typename Transform<T>::Offsets const& o, Accum& total) {
    const Problem& p = params.problem;
    const TermPlan& plan = params.plan;
    Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename T::SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename T::SmemLayoutB{});
    Tensor tCrA = thr_mma.make_fragment_A(thr_mma.partition_A(sA));  // smem descriptors (.., slice + SA buf)
    Tensor tCrB = thr_mma.make_fragment_B(thr_mma.partition_B(sB));
    clear(total);
    Tensor p0 = make_fragment_like(total);
    Tensor p1 = make_fragment_like(total);  // (T::kPartials > 1 only: unused otherwise)
    // fp16's exponents given (Scales from row_exp, col_exp), or found as
    // the cut meets each row's and column's first nonzero K-tile.
    typename Transform<T>::Scales sc;
    if constexpr (T::kExpsInKernel)
      sc = Transform<T>::unchosen(p, w);
    else
      sc = Transform<T>::scales(p, w);
    KChunks it(plan, params.k_tiles, w.split, p.splits);
    int to_cut = it.ke - it.kb;  // K-tiles of this item not yet cut
    cut(params, pipeline, read, smem, o, sc, 0);
    --to_cut;
    step_barrier();
    int buf = 0;
    bool fresh0 = true, fresh1 = true;  // the partial starts from zero at its next term
    for (; !it.done(); it.next()) {
      const int n = it.kt_end - it.kt_begin;
      for (int i = 0; i < n; ++i) {
        warpgroup_fence_operand(p0);
        if constexpr (T::kPartials > 1) warpgroup_fence_operand(p1);
        warpgroup_arrive();
        // Group 1's terms (the smaller weight) first in the order, then
        // group 0's (mainloop.cuh).
        CUTLASS_PRAGMA_UNROLL
        for (int t = 0; t < T::kTerms1; ++t)
          Mainloop<T>::term(tiled_mma, tCrA, tCrB, SA * buf + p.term_a[t], SB * buf + p.term_b[t], p1, t == 0 && fresh1);
        CUTLASS_PRAGMA_UNROLL
        for (int t = T::kTerms1; t < T::kTerms1 + T::kTerms0; ++t)
          Mainloop<T>::term(tiled_mma, tCrA, tCrB, SA * buf + p.term_a[t], SB * buf + p.term_b[t], p0,
                            t == T::kTerms1 && fresh0);
        fresh0 = fresh1 = false;
        warpgroup_commit_batch();
        if (to_cut > 0) {  // the next K-tile's slices, under this one's wgmma
          cut(params, pipeline, read, smem, o, sc, buf ^ 1);
          --to_cut;
        }
        warpgroup_wait<0>();
        warpgroup_fence_operand(p0);
        if constexpr (T::kPartials > 1) warpgroup_fence_operand(p1);
        step_barrier();
        buf ^= 1;
      }
      if constexpr (T::kPartials > 1) {
        if (it.promotes_group1() && !fresh1) {  // the smaller weight first
          Mainloop<T>::promote(total, p1, plan.exp[1]);
          fresh1 = true;
        }
      }
      Mainloop<T>::promote(total, p0, plan.exp[0]);
      fresh0 = true;
    }
    if constexpr (T::kExpsInKernel) {  // the exponents found, for this item's epilogue (other threads read them)
      Transform<T>::write_exponents(p, w, sc);
      step_barrier();
    }
  }

  // The same loop with A's slices in registers (T::kRegisterA, wgmma's RS
  // form): each consumer cuts its own rows of A from the FP32 stage into
  // register fragments, buffers 0 and 1 alternating like B's slice tiles in
  // shared memory (registers cannot be indexed at run time, so the steps
  // alternate as two instantiations of one step, and the terms are the
  // configuration's own, T::term_a / T::term_b, which launch_f32 checks
  // against the problem's). Per K-tile: issue every term's wgmma on buffer
  // t % 2; cut K-tile t + 1 (A into registers, B into shared memory); wait;
  // barrier; promote at the end of a chunk.
  template <class Accum, class ThrMma>
  static __device__ __forceinline__ void mma_rs(typename T::Params const& params, Pipeline& pipeline,
                                                PipelineState& read, typename T::SharedStorage& smem,
                                                WorkTile const& w, typename T::TiledMma& tiled_mma,
                                                ThrMma const& thr_mma, typename Transform<T>::Offsets const& o,
                                                Accum& total) {
    const Problem& p = params.problem;
    Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename T::SmemLayoutA{});  // (shapes only)
    Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename T::SmemLayoutB{});
    Tensor tCrB = thr_mma.make_fragment_B(thr_mma.partition_B(sB));
    Tensor ra0 = thr_mma.partition_fragment_A(sA(_, _, 0));  // (MMA, MMA_M, MMA_K) in registers
    decltype(ra0) ra[2][SA];
    clear(total);
    Tensor p0 = make_fragment_like(total);
    KChunks it(params.plan, params.k_tiles, w.split, p.splits);
    const int n = it.ke - it.kb;  // K-tiles of this item
    const float step = pow2f(params.cut.lo_scale_bits);
    auto cut = [&](auto buf) {
      pipeline.consumer_wait(read);
      Transform<T>::cut_a_regs(step, smem, o, read.index(), ra[decltype(buf)::value]);
      typename Transform<T>::Scales none;  // (bf16: unscaled)
      Transform<T>::run(params.cut, smem, o, read.index(), decltype(buf)::value, none);
      pipeline.consumer_release(read);
      ++read;
      cutlass::arch::fence_view_async_shared();
    };
    cut(Int<0>{});
    step_barrier();
    int t = 0;
    bool fresh = true;
    auto tile = [&](auto buf) {
      constexpr int B = decltype(buf)::value;
      warpgroup_fence_operand(p0);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < SA; ++i) warpgroup_fence_operand(ra[B][i]);
      warpgroup_arrive();
      cute::for_each(make_int_sequence<T::kTerms0>{}, [&](auto q) {
        constexpr int ia = T::term_a(decltype(q)::value), ib = T::term_b(decltype(q)::value);
        tiled_mma.accumulate_ = decltype(q)::value == 0 && fresh ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
        CUTLASS_PRAGMA_UNROLL
        for (int kb = 0; kb < size<2>(ra0); ++kb) {
          cute::gemm(tiled_mma, ra[B][ia](_, _, kb), tCrB(_, _, kb, SB * B + ib), p0);
          tiled_mma.accumulate_ = GMMA::ScaleOut::One;
        }
      });
      warpgroup_commit_batch();
      if (t + 1 < n) cut(Int<B ^ 1>{});  // the next K-tile, under this one's wgmma
      warpgroup_wait<0>();
      warpgroup_fence_operand(p0);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < SA; ++i) warpgroup_fence_operand(ra[B][i]);
      step_barrier();
      ++t;
      fresh = false;
      if (it.kb + t == it.kt_end) {  // the chunk's last K-tile
        Mainloop<T>::promote(total, p0, params.plan.exp[0]);
        it.next();
        fresh = true;
      }
    };
    while (true) {
      tile(Int<0>{});
      if (t == n) break;
      tile(Int<1>{});
      if (t == n) break;
    }
  }
};

}  // namespace fused
}  // namespace jaxemu
