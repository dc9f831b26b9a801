// Epilogue of the fused GEMM: C written once, from the FP32 accumulators.
// Applies the exact power-of-two unscaling of fp16 row/column scaling.
// (NaN/Inf need nothing here: FP32's special-value rules follow from max |A|
// and max |B|, tested before the launch by the caller or after it by the
// fix-up kernel in the same FFI call, ffi/fused.h: fixup_special.)
//
// Two ways to write C: through shared memory and TMA stores (asynchronous,
// whole lines; 128-wide tiles), or straight from registers (192-wide tiles,
// whose shared memory is all pipeline; and any tile when N % 4 != 0).
#pragma once

#include <type_traits>

#include <cstdint>

#include "cute/tensor.hpp"

#include "mainloop.cuh"
#include "scheduler.cuh"
#include "traits.cuh"

namespace jaxemu {
namespace fused {

// x * 2^e where 2^e is no normal float: one correctly rounded ldexpf, out
// of line (the epilogue unrolls over every accumulator; inlined, this rare
// path made the code of each unscaling many times larger).
static __device__ __noinline__ float ldexp_rare(float x, int e) { return ldexpf(x, e); }

// x * 2^e, correctly rounded (exact unless it under/overflows).
__device__ __forceinline__ float times_pow2(float x, int e) {
  if (e >= -126 && e <= 127) return x * __int_as_float((e + 127) << 23);
  return ldexp_rare(x, e);
}

// Whether a kernel configuration finds fp16's exponents itself
// (traits_f32.cuh: kExpsInKernel), so that the others compile without
// that path.
template <class T, class = void>
struct FindsExponents : std::false_type {};
template <class T>
struct FindsExponents<T, std::void_t<decltype(T::kExpsInKernel)>> : std::bool_constant<T::kExpsInKernel> {};

template <class T>
struct Epilogue {
  static constexpr int TM = T::kTileM, TN = T::kTileN;

  // fp16's row/column scaling undone: C[r, c] *= 2^-(row_exp[r] + col_exp[c]).
  // Each exponent this thread needs is loaded once: its accumulator value
  // i = v + 2 h + 4 j lies at row R + 8 h, column C + 8 j + v (v, h in
  // {0, 1}; the SM90 wgmma FP32 accumulator of a 64 x TN warpgroup tile),
  // so two rows and TN / 4 columns, not two loads per value (the GPU tests
  // compare fp16x3 on wide-exponent data, where any other pairing is wrong).
  // Columns C + 8 j and C + 8 j + 1 are adjacent, C even: one 8-byte load
  // per pair where the tile is inside C and the pair aligned.
  // Where every exponent lies in [-63, 63] (fp16's scaling exponent is
  // 13 - floor(log2 max) of the row or column: every maximum in [2^-50,
  // 2^77)), 2^-r and 2^-c are normal floats
  // and so is their product: each value takes one multiply by it, which
  // rounds as ldexpf does (the same bits), instead of a range test and a
  // branch per value (at short K the epilogue is most of a tile's time:
  // ncu, docs/performance.md stop 36).
  // Accumulator value i's row of the thread's two (h) and its column slot
  // (2 j + v) of the thread's TN / 4 (see unscale), and the first value in
  // column slot q.
  static constexpr __device__ int row_of(int i) { return (i / 2) % 2; }
  static constexpr __device__ int col_of(int i) { return 2 * (i / 4) + i % 2; }
  static constexpr __device__ int value_in_col(int q) { return 4 * (q / 2) + q % 2; }

  template <class Accum, class Coords>
  static __device__ void unscale(Problem const& p, WorkTile const& w, Accum& total, Coords const& coords) {
    static_assert(decltype(size(total))::value == TN / 2, "one 64 x TN wgmma accumulator per thread");
    const int64_t M = p.m, N = p.n;
    const int64_t row0 = int64_t(w.m_blk) * TM, col0 = int64_t(w.n_blk) * TN;
    // Exponents found in this kernel (Problem::item_exp, per K-split) are
    // read with plain loads: other threads of the CTA wrote them before the
    // mainloop's barriers, and the read-only path (__ldg) need not see that.
    constexpr bool in_kernel = FindsExponents<T>::value;  // (ffi/fused_dispatch.cu: item_exp set for these)
    // (No __restrict__: this kernel also writes item_exp.)
    const int32_t* row_exp =
        in_kernel ? p.item_exp + (int64_t(w.split) * p.batch + w.l) * M : p.row_exp + int64_t(w.l) * M;
    const int32_t* col_exp =
        in_kernel ? p.item_exp + int64_t(p.splits) * p.batch * M + (int64_t(w.split) * p.batch + w.l) * N
                  : p.col_exp + int64_t(w.l) * N;
    auto load = [&](const int32_t* q) {
      if constexpr (in_kernel) return *q;
      else return __ldg(q);
    };
    int re[2];
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int64_t r = row0 + get<0>(coords(2 * h));
      re[h] = r < M ? load(row_exp + r) : 0;
    }
    int ce[TN / 4];  // ce[2 j + v]: column C + 8 j + v
    const int64_t c0 = col0 + get<1>(coords(0));
    const int32_t* cp = col_exp + c0;
    if (col0 + TN <= N && (reinterpret_cast<uintptr_t>(cp) & 7) == 0) {
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < TN / 8; ++j) {
        const int2* q = reinterpret_cast<const int2*>(cp + 8 * j);
        int2 v;
        if constexpr (in_kernel) v = *q;
        else v = __ldg(q);
        ce[2 * j] = v.x;
        ce[2 * j + 1] = v.y;
      }
    } else {
      CUTLASS_PRAGMA_UNROLL
      for (int q = 0; q < TN / 4; ++q) {
        const int64_t c = col0 + get<1>(coords(value_in_col(q)));
        ce[q] = c < N ? load(col_exp + c) : 0;
      }
    }
    bool normal = true;
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) normal &= unsigned(re[h] + 63) <= 126u;
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < TN / 4; ++q) normal &= unsigned(ce[q] + 63) <= 126u;
    if (normal) {
      float sr[2], sc[TN / 4];
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) sr[h] = __int_as_float((127 - re[h]) << 23);
      CUTLASS_PRAGMA_UNROLL
      for (int q = 0; q < TN / 4; ++q) sc[q] = __int_as_float((127 - ce[q]) << 23);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < TN / 2; ++i) total(i) = total(i) * (sr[row_of(i)] * sc[col_of(i)]);
    } else {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < TN / 2; ++i) total(i) = times_pow2(total(i), -(re[row_of(i)] + ce[col_of(i)]));
    }
  }

  template <class Accum, class Coords>
  static __device__ void store(typename T::Params const& params, WorkTile const& w, Accum& total,
                               Coords const& coords /* (row, col) in the tile per accumulator */) {
    const Problem& p = params.problem;
    const int64_t M = p.m, N = p.n;
    float* __restrict__ out = p.c + (int64_t(w.split) * p.batch + w.l) * M * N;
    const int64_t row0 = int64_t(w.m_blk) * TM, col0 = int64_t(w.n_blk) * TN;
    if (FindsExponents<T>::value || p.row_exp != nullptr) unscale(p, w, total, coords);
    if constexpr (T::kTmaStore) {
      if (params.tma_store) {
        store_tma(params, w, total);
        return;
      }
    }
    const bool pairs = (N % 2) == 0;  // (col, col + 1) pairs are 8-byte aligned
    // The wgmma accumulator layout holds (row, col) and (row, col + 1) in
    // consecutive registers, col even.
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(total); i += 2) {
      const int64_t r = row0 + get<0>(coords(i)), c = col0 + get<1>(coords(i));
      if (r >= M || c >= N) continue;
      const float v0 = total(i), v1 = total(i + 1);
      float* dst = out + r * N + c;
      if (c + 1 < N) {
        if (pairs) {
          *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
        } else {
          dst[0] = v0;
          dst[1] = v1;
        }
      } else {
        dst[0] = v0;
      }
    }
  }

  // The exponents unscale() will read for work item w, fetched into L1 now,
  // as its mainloop starts: one 128-byte line per thread of the first few
  // (the tile's TN column exponents, this warpgroup's 64 row exponents, and
  // a line more for each, as neither need be 128-byte aligned). Loaded from
  // L2 at the epilogue, their latency stalled every thread between the last
  // wgmma and the first store, with the tensor cores idle (ncu's samples on
  // the kNN product, docs/performance.md stop 31); registers to hold them
  // through the mainloop there are none.
  static __device__ void prefetch_exponents(Problem const& p, WorkTile const& w) {
    if (p.row_exp == nullptr) return;
    constexpr int kColLines = TN / 32 + 1, kRowLines = TM / T::kConsumerWarpgroups / 32 + 1;
    const int t = int(threadIdx.x) % 128, wg = int(threadIdx.x) / 128 - 1;
    const int32_t* line = nullptr;
    if (t < kColLines) {
      const int64_t c = int64_t(w.n_blk) * TN + 32 * t;
      if (c < p.n) line = p.col_exp + int64_t(w.l) * p.n + c;
    } else if (t < kColLines + kRowLines) {
      const int64_t r = int64_t(w.m_blk) * TM + wg * (TM / T::kConsumerWarpgroups) + 32 * (t - kColLines);
      if (r < p.m) line = p.row_exp + int64_t(w.l) * p.m + r;
    }
    if (line != nullptr) asm volatile("prefetch.global.L1 [%0];" ::"l"(line));
  }

  // Each consumer warpgroup writes its 64 rows of the tile, kEpiCols columns
  // at a time, into its own shared-memory block (128-byte swizzle: the 8 rows
  // a warp writes at once fall in distinct banks), then one thread issues the
  // TMA store of the block; the last block's store runs while the next
  // tile's mainloop does.
  template <class Accum>
  static __device__ void store_tma(typename T::Params const& params, WorkTile const& w, Accum const& total) {
    const Problem& p = params.problem;
    const int wg = int(threadIdx.x) / 128 - 1;  // consumer warpgroup 0 or 1
    const bool leader = threadIdx.x % 128 == 0;
    constexpr int kRows = TM / T::kConsumerWarpgroups, kCols = T::kEpiCols;
    // Accumulator i of a 64 x TN wgmma tile lies in column 8 (i / 4) + ...
    // (Epilogue::unscale): block h holds accumulators [h kPerBlock, (h+1) kPerBlock).
    constexpr int kPerBlock = kCols / 2;
    static_assert(TN % kCols == 0 && decltype(size(total))::value == TN / 2, "64 x TN accumulator per thread");
    extern __shared__ __align__(1024) char smem_raw[];
    auto& smem = *reinterpret_cast<typename T::SharedStorage*>(smem_raw);
    Tensor sC = make_tensor(make_smem_ptr(smem.c.data() + wg * cosize_v<typename T::SmemLayoutC>),
                            typename T::SmemLayoutC{});  // (64, kCols)
    typename T::TiledMma tiled_mma;
    auto thr_mma = tiled_mma.get_thread_slice(threadIdx.x - 128);
    Tensor coords = thr_mma.partition_C(make_identity_tensor(Shape<Int<TM>, Int<TN>>{}));
    Tensor mC = params.tma_c.get_tma_tensor(make_shape(int(p.m), int(p.n), p.splits * int(p.batch)));
    auto cta = params.tma_c.get_slice(0);

    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < TN / kCols; ++h) {
      if (leader) tma_store_wait<0>();  // the previous block's store has read the buffer
      cutlass::arch::NamedBarrier::sync(128, 1 + wg);
      CUTLASS_PRAGMA_UNROLL
      for (int i = h * kPerBlock; i < (h + 1) * kPerBlock; i += 2) {
        const int r = get<0>(coords(i)) - wg * kRows, c = get<1>(coords(i)) - h * kCols;
        // (st.shared: through a generic pointer this was a generic store)
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(cute::cast_smem_ptr_to_uint(&sC(r, c))),
                     "f"(total(i)), "f"(total(i + 1))
                     : "memory");
      }
      cutlass::arch::fence_view_async_shared();  // smem writes visible to the TMA unit
      cutlass::arch::NamedBarrier::sync(128, 1 + wg);
      if (leader) {
        Tensor gC = local_tile(mC(_, _, w.split * int(p.batch) + w.l), Shape<Int<kRows>, Int<kCols>>{},
                               make_coord(w.m_blk * T::kConsumerWarpgroups + wg, w.n_blk * (TN / kCols) + h));
        copy(params.tma_c, cta.partition_S(sC), cta.partition_D(gC));
        tma_store_arrive();
      }
    }
  }

  // Before the CTA exits: its last TMA stores have read shared memory.
  static __device__ void finish() {
    if constexpr (T::kTmaStore) {
      if (threadIdx.x % 128 == 0) tma_store_wait<0>();
    }
  }
};

}  // namespace fused
}  // namespace jaxemu
