// Mainloop of the fused GEMM: a producer thread streams K-tiles of every
// slice through a TMA pipeline; two consumer warpgroups multiply them on the
// tensor cores and promote partial sums into FP32.
//
// A pipeline stage holds all SA slices of A's and SB of B's K-tile, each loaded once;
// the consumers issue every term's wgmma on that stage, smallest terms first
// (the scheme's order: a partial accumulator that starts a chunk from zero
// takes the small terms' truncation errors at their own scale, and hi*hi's at
// the scale of hi*hi, as when every term had an accumulator of its own).
// After each chunk (params.h: TermPlan, scheduler.cuh: KChunks) the partial
// accumulator is added to `total` as total = fma(partial, 2^e, total): the
// weight is an exact power of two, so this is one round-to-nearest FP32
// addition. One drain of the wgmma pipeline per chunk serves every term of
// it, not one per term and chunk, and each slice tile crosses L2 once per
// tile of C, not once per term that reads it.
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
  static constexpr int TM = T::kTileM, TN = T::kTileN, TK = T::kTileK, SA = T::kSlicesA, SB = T::kSlicesB;

  // Producer: one thread issues the TMA loads of every slice of every K-tile
  // of the work item's K range (SA loads of A and SB of B per stage, one barrier).
  static __device__ void load(typename T::Params const& params, Pipeline& pipeline, PipelineState& write,
                              typename T::SharedStorage& smem, WorkTile const& w) {
    const Problem& p = params.problem;
    const int L = int(p.batch);
    Tensor mA = params.tma_a.get_tma_tensor(T::gmem_shape(int(p.m), int(p.k), SA, L));
    Tensor mB = params.tma_b.get_tma_tensor(T::gmem_shape(int(p.n), int(p.k), SB, L));
    Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename T::SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename T::SmemLayoutB{});
    auto tma_a = params.tma_a.get_slice(0);
    auto tma_b = params.tma_b.get_slice(0);
    Tensor tAsA = tma_a.partition_D(sA);  // (TMA, TMA_M, TMA_K, slice + SA stage)
    Tensor tBsB = tma_b.partition_D(sB);
    const KChunks range(params.plan, params.k_tiles, w.split, p.splits);
    for (int kt = range.kb; kt < range.ke; ++kt) {
      pipeline.producer_acquire(write);
      auto* bar = pipeline.producer_get_barrier(write);
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < SA; ++s) {
        Tensor gA = local_tile(mA(_, _, make_coord(s, w.l)), Shape<Int<TM>, Int<TK>>{},
                               make_coord(w.m_blk, _));  // (TM, TK, k-tile)
        copy(params.tma_a.with(*bar, 0), tma_a.partition_S(gA)(_, _, _, kt), tAsA(_, _, _, s + SA * write.index()));
      }
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < SB; ++s) {
        Tensor gB = local_tile(mB(_, _, make_coord(s, w.l)), Shape<Int<TN>, Int<TK>>{}, make_coord(w.n_blk, _));
        copy(params.tma_b.with(*bar, 0), tma_b.partition_S(gB)(_, _, _, kt), tBsB(_, _, _, s + SB * write.index()));
      }
      ++write;
    }
  }

  // One term's K-blocks [KB0, KB1) of a K-tile of wgmma from stage slices
  // (ia, ib) into `acc`, starting it from zero when `fresh`; the whole K-tile
  // by default.
  template <int KB0 = 0, int KB1 = -1, class Acc, class FragA, class FragB>
  static __device__ void term(typename T::TiledMma& tiled_mma, FragA const& tCrA, FragB const& tCrB, int ia, int ib,
                              Acc& acc, bool fresh) {
    constexpr int kEnd = KB1 < 0 ? decltype(size<2>(tCrA))::value : KB1;
    tiled_mma.accumulate_ = fresh ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
    CUTLASS_PRAGMA_UNROLL
    for (int kb = KB0; kb < kEnd; ++kb) {
      cute::gemm(tiled_mma, tCrA(_, _, kb, ia), tCrB(_, _, kb, ib), acc);
      tiled_mma.accumulate_ = GMMA::ScaleOut::One;
    }
  }

  // Promotion: one round-to-nearest FP32 add per element.
  template <class Accum>
  static __device__ void promote(Accum& total, Accum& partial, int exp) {
    const float weight = __int_as_float((exp + 127) << 23);  // 2^exp, |exp| <= 126
    warpgroup_fence_operand(partial);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(total); ++i) total(i) = fmaf(partial(i), weight, total(i));
  }

  // Consumers: the whole K-loop of one work item into `total` (FP32), with
  // partial accumulators p0 (group 0) and p1 (group 1; unused when
  // T::kPartials == 1), local to the work item so that they are not live
  // across the epilogue. Per K-tile: one batch of every term's wgmma (two
  // with T::kHalfTile, group 0 promoted between them); after it, the
  // previous K-tile's batch is complete and its stage released.
  // After a chunk: drain, promote. (Overlapping the promotion with the next
  // chunk's wgmma would need yet another partial: ptxas serialized the wgmma
  // (warning C7514) and spilled when that was tried: docs/performance.md.)
  template <class Accum, class ThrMma>
  static __device__ void mma(typename T::Params const& params, Pipeline& pipeline, PipelineState& read,
                             typename T::SharedStorage& smem, WorkTile const& w, typename T::TiledMma& tiled_mma,
                             ThrMma const& thr_mma, Accum& total) {
    const Problem& p = params.problem;
    const TermPlan& plan = params.plan;
    Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename T::SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename T::SmemLayoutB{});
    Tensor tCsA = thr_mma.partition_A(sA);  // (MMA, MMA_M, MMA_K, slice + SA stage)
    Tensor tCsB = thr_mma.partition_B(sB);
    Tensor tCrA = thr_mma.make_fragment_A(tCsA);  // smem descriptors
    Tensor tCrB = thr_mma.make_fragment_B(tCsB);
    clear(total);
    Tensor p0 = make_fragment_like(total);
    Tensor p1 = make_fragment_like(total);
    bool fresh0 = true, fresh1 = true;  // the partial starts from zero at its next term
    for (KChunks it(plan, params.k_tiles, w.split, p.splits); !it.done(); it.next()) {
      PipelineState release = read;
      const int n = it.kt_end - it.kt_begin;
      for (int i = 0; i < n; ++i) {
        pipeline.consumer_wait(read);
        const int base_a = SA * read.index(), base_b = SB * read.index();
        // Every term's K-blocks [KB0, KB1) of this K-tile, as one batch.
        // Group 1's terms (the smaller weight) come first in the order
        // (TermPlan::n1 of them), then group 0's: one loop per accumulator.
        auto issue = [&](auto kb0, auto kb1) {
          constexpr int KB0 = decltype(kb0)::value, KB1 = decltype(kb1)::value;
          warpgroup_fence_operand(p0);
          if constexpr (T::kPartials > 1) warpgroup_fence_operand(p1);
          warpgroup_arrive();
          if constexpr (T::kFixedTerms) {
            CUTLASS_PRAGMA_UNROLL
            for (int t = 0; t < T::kTerms1; ++t)
              term<KB0, KB1>(tiled_mma, tCrA, tCrB, base_a + p.term_a[t], base_b + p.term_b[t], p1, t == 0 && fresh1);
            CUTLASS_PRAGMA_UNROLL
            for (int t = T::kTerms1; t < T::kTerms1 + T::kTerms0; ++t)
              term<KB0, KB1>(tiled_mma, tCrA, tCrB, base_a + p.term_a[t], base_b + p.term_b[t], p0,
                             t == T::kTerms1 && fresh0);
            fresh1 = false;
            fresh0 = false;
          } else {
            if constexpr (T::kPartials > 1) {
#pragma unroll 1
              for (int t = 0; t < plan.n1; ++t) {
                term<KB0, KB1>(tiled_mma, tCrA, tCrB, base_a + p.term_a[t], base_b + p.term_b[t], p1, fresh1);
                fresh1 = false;
              }
            }
#pragma unroll 1
            for (int t = plan.n1; t < p.nterms; ++t) {
              term<KB0, KB1>(tiled_mma, tCrA, tCrB, base_a + p.term_a[t], base_b + p.term_b[t], p0, fresh0);
              fresh0 = false;
            }
          }
          warpgroup_commit_batch();
        };
        constexpr int KB = decltype(size<2>(tCrA))::value;
        if constexpr (T::kHalfTile) {
          // Group 0 promoted after the first half of the K-tile too (its
          // chunk is one K-tile: n == 1): drain, add, and its second half
          // starts a fresh partial. Group 1 goes on across the K-tile.
          issue(Int<0>{}, Int<KB / 2>{});
          warpgroup_wait<0>();
          warpgroup_fence_operand(p0);
          promote(total, p0, plan.exp[0]);
          fresh0 = true;
          issue(Int<KB / 2>{}, Int<KB>{});
        } else {
          issue(Int<0>{}, Int<KB>{});
        }
        warpgroup_wait<1>();  // the previous K-tile's batch is done: release its stage
        warpgroup_fence_operand(p0);
        if constexpr (T::kPartials > 1) warpgroup_fence_operand(p1);
        if (i > 0) {
          pipeline.consumer_release(release);
          ++release;
        }
        ++read;
      }
      warpgroup_wait<0>();
      pipeline.consumer_release(release);
      if constexpr (T::kPartials > 1) {
        if (it.promotes_group1() && !fresh1) {  // the smaller weight first
          promote(total, p1, plan.exp[1]);
          fresh1 = true;
        }
      }
      promote(total, p0, plan.exp[0]);
      fresh0 = true;
    }
  }
};

}  // namespace fused
}  // namespace jaxemu
