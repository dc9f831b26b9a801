// Mainloop of the MixPert kernel: a producer thread streams stages (every
// int8 slice of A's and B's 128-step K-tile, and the scale factors of its
// four MixPert tiles) through a TMA pipeline; the consumer warpgroups, per
// MixPert K-tile of 32, run each level's slice products on the int8 tensor
// cores into that level's int32 accumulator (exact), then fold the tile
// into the FP32 total:
//   total += (sum_L 2^(7 (NL - 1 - L)) P_L) * (scale_a[row] * scale_b[col])
// one round-to-nearest FP32 multiply-add per element and K-tile (the level
// combination may round too, where it exceeds 24 bits). The tile's wait
// for its wgmma is the price of per-tile exponents: the consumer
// warpgroups take turns, one converting while the other's products run.
// (A warpgroup folding K-tile t while its own K-tile t + 1's products run,
// in a second set of level accumulators at narrower tiles, was slower on
// every shape from 2048^3 up: 8192^3 7.61 -> 8.27 ms with two warpgroups,
// 7.17 -> 11.1 with three; H200, docs/performance.md, stop 52.)
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/pipeline/sm90_pipeline.hpp"

#include "../fused/epilogue.cuh"
#include "../fused/scheduler.cuh"
#include "traits.cuh"

namespace jaxemu {
namespace mixpert {

// sum_L 2^(7 (NL - 1 - L)) P_L of accumulator value i, rounded as an FMA
// chain over the levels' exact conversions rounds it: exact up to 2^24;
// beyond, each of the (NL - 1) steps may round (at most ~1.5 units of the
// result's last place). The last two levels add in int32 (|P_L| < 2^21 for
// a 32-wide K-tile, so 128 P_L + P_(L+1) < 2^29: exact), and one conversion
// rounds that sum to nearest, the value fmaf(P_L, 128, P_(L+1)) gives (two
// levels: two instructions where the chain took five; three: four where
// it took eight). (The kernel is issue-bound in this
// fold: on an H200, ncu, int8_l4 at 8192^3, 6.37 G instructions and 72 % of
// the issue slots with the chain of magic-number conversions (an integer add
// and a float subtraction each); 4.22 G and 60 % with this one, the kernel
// 9.42 -> 7.43 ms, C bit-identical (docs/performance.md, stop 50). I2F runs
// on the ALU pipe there, not at a quarter rate.)
template <int NL, class Acc>
__device__ __forceinline__ float levels_sum(Acc const (&acc)[NL], int i) {
  const float low = __int2float_rn(acc[NL - 2](i) * 128 + acc[NL - 1](i));
  if constexpr (NL == 2) {
    return low;
  } else {
    static_assert(NL == 3, "MixPert levels I-IV have two or three levels");
    return fmaf(__int2float_rn(acc[0](i)), 16384.0f, low);  // |P_0| < 2^21: exact
  }
}

template <class T>
struct Mainloop {
  using Pipeline = typename T::Pipeline;
  using PipelineState = typename T::PipelineState;
  static constexpr int TM = T::kTileM, TN = T::kTileN, TK = T::kTileK, SA = T::kSlicesA, SB = T::kSlicesB;
  static constexpr int NL = T::kLevels;

  // K-tiles (of TK) of split `split`: an equal contiguous range each.
  static __device__ void k_range(int k_tiles, int split, int splits, int& kb, int& ke) {
    kb = int(int64_t(k_tiles) * split / splits);
    ke = int(int64_t(k_tiles) * (split + 1) / splits);
  }

  static __device__ void load(typename T::Params const& params, Pipeline& pipeline, PipelineState& write,
                              typename T::SharedStorage& smem, fused::WorkTile const& w) {
    const fused::Problem& p = params.problem;
    const int L = int(p.batch);
    Tensor mA = params.tma_a.get_tma_tensor(T::gmem_shape(int(p.m), int(p.k), SA, L));
    Tensor mB = params.tma_b.get_tma_tensor(T::gmem_shape(int(p.n), int(p.k), SB, L));
    Tensor mSA = params.tma_sa.get_tma_tensor(T::scale_shape(params.m_pad, int(p.k), L));
    Tensor mSB = params.tma_sb.get_tma_tensor(T::scale_shape(params.n_pad, int(p.k), L));
    Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename T::SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename T::SmemLayoutB{});
    Tensor sSA = make_tensor(make_smem_ptr(smem.scale_a.data()), typename T::SmemLayoutSA{});
    Tensor sSB = make_tensor(make_smem_ptr(smem.scale_b.data()), typename T::SmemLayoutSB{});
    auto tma_a = params.tma_a.get_slice(0);
    auto tma_b = params.tma_b.get_slice(0);
    auto tma_sa = params.tma_sa.get_slice(0);
    auto tma_sb = params.tma_sb.get_slice(0);
    Tensor tAsA = tma_a.partition_D(sA);  // (TMA, TMA_M, TMA_K, slice + SA stage)
    Tensor tBsB = tma_b.partition_D(sB);
    Tensor tSAs = tma_sa.partition_D(sSA);  // (TMA, _1, _1, stage)
    Tensor tSBs = tma_sb.partition_D(sSB);
    // This tile's scale factors, by stage of K: (TM, KT, k-stage) and (TN, KT, k-stage).
    Tensor gSA = local_tile(mSA(_, _, w.l), Shape<Int<TM>, Int<T::kKTiles>>{}, make_coord(w.m_blk, _));
    Tensor gSB = local_tile(mSB(_, _, w.l), Shape<Int<TN>, Int<T::kKTiles>>{}, make_coord(w.n_blk, _));
    Tensor tSAg = tma_sa.partition_S(gSA);
    Tensor tSBg = tma_sb.partition_S(gSB);
    int kb, ke;
    k_range(params.k_tiles, w.split, p.splits, kb, ke);
    for (int kt = kb; kt < ke; ++kt) {
      pipeline.producer_acquire(write);
      auto* bar = pipeline.producer_get_barrier(write);
      const int stage = write.index();
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < SA; ++s) {
        Tensor gA = local_tile(mA(_, _, make_coord(s, w.l)), Shape<Int<TM>, Int<TK>>{}, make_coord(w.m_blk, _));
        copy(params.tma_a.with(*bar, 0), tma_a.partition_S(gA)(_, _, _, kt), tAsA(_, _, _, s + SA * stage));
      }
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < SB; ++s) {
        Tensor gB = local_tile(mB(_, _, make_coord(s, w.l)), Shape<Int<TN>, Int<TK>>{}, make_coord(w.n_blk, _));
        copy(params.tma_b.with(*bar, 0), tma_b.partition_S(gB)(_, _, _, kt), tBsB(_, _, _, s + SB * stage));
      }
      copy(params.tma_sa.with(*bar, 0), tSAg(_, _, _, kt), tSAs(_, _, _, stage));
      copy(params.tma_sb.with(*bar, 0), tSBg(_, _, _, kt), tSBs(_, _, _, stage));
      ++write;
    }
  }

  // Every slice product of MixPert K-tile kb of the stage, each into its
  // level's accumulator (started from zero by the level's first product).
  template <class Acc, class FragA, class FragB>
  static __device__ void products(typename T::TiledMma& tiled_mma, FragA const& tCrA, FragB const& tCrB, int kb,
                                  int base_a, int base_b, Acc (&acc)[NL]) {
    bool fresh[NL];
    CUTLASS_PRAGMA_UNROLL
    for (int l = 0; l < NL; ++l) fresh[l] = true;
    // Smallest level first, as the xla backend adds them (the order does not
    // matter for exact integer sums; it does for when each wgmma may issue).
    CUTLASS_PRAGMA_UNROLL
    for (int l = NL - 1; l >= 0; --l) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < SA; ++i) {
        const int j = l - i;
        if (j < 0 || j >= SB) continue;
        tiled_mma.accumulate_ = fresh[l] ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
        cute::gemm(tiled_mma, tCrA(_, _, kb, base_a + i), tCrB(_, _, kb, base_b + j), acc[l]);
        fresh[l] = false;
      }
    }
  }

  // Orders the compiler's register accesses of acc around the wgmma.
  template <class Acc>
  static CUTLASS_DEVICE void fence(Acc (&acc)[NL]) {
    CUTLASS_PRAGMA_UNROLL
    for (int l = 0; l < NL; ++l) warpgroup_fence_operand(acc[l]);
  }

  // One K-tile's products issued into `acc` (asynchronous: the caller
  // waits with warpgroup_wait before reading acc).
  template <class Acc, class FragA, class FragB>
  static CUTLASS_DEVICE void issue(typename T::TiledMma& tiled_mma, FragA const& tCrA, FragB const& tCrB, int t,
                               int stage, Acc (&acc)[NL]) {
    fence(acc);
    warpgroup_arrive();
    products(tiled_mma, tCrA, tCrB, t, SA * stage, SB * stage, acc);
    warpgroup_commit_batch();
  }

  // K-tile t of `stage`, its products in acc (complete), folded into the
  // FP32 total with the tile's scale factors (rows: TM per K-tile, stage
  // after stage; this thread's two rows and TN / 4 columns).
  template <class Acc, class Accum>
  static CUTLASS_DEVICE void fold(Acc const (&acc)[NL], Accum& total, typename T::SharedStorage& smem, int stage, int t,
                              int const (&rows)[2], int const (&cols)[TN / 4]) {
    using Epi = fused::Epilogue<T>;
    const float* sa = smem.scale_a.data() + (stage * T::kKTiles + t) * TM;
    const float* sb = smem.scale_b.data() + (stage * T::kKTiles + t) * TN;
    float fa[2], fb[TN / 4];
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) fa[h] = sa[rows[h]];
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < TN / 4; q += 2) {  // columns 2j and 2j + 1 are adjacent, the first even
      const float2 v = *reinterpret_cast<const float2*>(sb + cols[q]);
      fb[q] = v.x;
      fb[q + 1] = v.y;
    }
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(total); ++i) {
      const float v = levels_sum(acc, i);
      // v fa is exact (|v| >= 1 or v = 0, and fa a normal power of two
      // at least 2^-113: cuda_mixpert.in_range), then one rounding.
      // (fa fb first could underflow to zero where the contribution
      // itself is a normal float: fa = fb = 2^-75 at level IV.)
      total(i) = fmaf(v * fa[Epi::row_of(i)], fb[Epi::col_of(i)], total(i));
    }
  }

  // The consumers' K-loop of one work item into `total` (FP32; the level
  // accumulators are local to it, not live across the epilogue). Each
  // output's K-tiles are folded in K order: the same bits for any tile
  // shape and number of consumer warpgroups.
  template <class Accum, class Coords, class ThrMma>
  static __device__ void mma(typename T::Params const& params, Pipeline& pipeline, PipelineState& read,
                             typename T::SharedStorage& smem, fused::WorkTile const& w,
                             typename T::TiledMma& tiled_mma, ThrMma const& thr_mma, Accum& total,
                             Coords const& coords) {
    using Epi = fused::Epilogue<T>;
    Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename T::SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename T::SmemLayoutB{});
    Tensor tCsA = thr_mma.partition_A(sA);  // (MMA, MMA_M, MMA_K, slice + SA stage)
    Tensor tCsB = thr_mma.partition_B(sB);
    Tensor tCrA = thr_mma.make_fragment_A(tCsA);  // smem descriptors
    Tensor tCrB = thr_mma.make_fragment_B(tCsB);
    using IntAcc = decltype(partition_fragment_C(tiled_mma, Shape<Int<TM>, Int<TN>>{}));
    clear(total);
    // This thread's two rows and TN / 4 columns of the tile (fused/epilogue.cuh:
    // accumulator i lies in row slot row_of(i), column slot col_of(i)).
    int rows[2], cols[TN / 4];
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) rows[h] = get<0>(coords(2 * h));
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < TN / 4; ++q) cols[q] = get<1>(coords(Epi::value_in_col(q)));

    int kb, ke;
    k_range(params.k_tiles, w.split, params.problem.splits, kb, ke);
    IntAcc acc[NL];
    CUTLASS_PRAGMA_UNROLL
    for (int l = 0; l < NL; ++l) acc[l] = partition_fragment_C(tiled_mma, Shape<Int<TM>, Int<TN>>{});
    for (int kt = kb; kt < ke; ++kt) {
      pipeline.consumer_wait(read);
      const int stage = read.index();
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < T::kKTiles; ++t) {
        issue(tiled_mma, tCrA, tCrB, t, stage, acc);
        warpgroup_wait<0>();
        fence(acc);
        fold(acc, total, smem, stage, t, rows, cols);
      }
      pipeline.consumer_release(read);
      ++read;
    }
  }
};

}  // namespace mixpert
}  // namespace jaxemu
