// Compile-only check (no GPU needed): can a warpgroup read one wgmma
// accumulator (convert and scale it into an FP32 total) while another
// accumulator's wgmma run, without ptxas serializing the wgmma? This is the
// question behind MixPert's levels on the int8 tensor cores (issue 14: each
// K-tile's exact int32 sum converted while the next K-tile's run) and
// fp16x3's per-K-tile promotion (issue 10: ffi/fused/mainloop.cuh,
// mma_deferred).
//
//   nvcc -std=c++17 -arch=sm_90a -O3 --expt-relaxed-constexpr -I.cutlass/include \
//        -Xptxas -v -c scripts/wgmma_overlap.cu [-DORDER=1|2|3]
//
// ORDER 1 (default): per step, issue K-tile kt's group into acc1, convert
//   acc0 (retired by the previous step's full wait), issue kt + 1 into acc0,
//   convert acc1 after a full wait: nothing in flight across the loop's
//   back edge. ptxas 13.0: no warning; the SASS interleaves the I2FP/FFMA
//   with the IGMMA of the group in flight.
// ORDER 2: fp16x3's shape of it (acc1 accumulates over 8 K-tiles, acc0 is
//   fresh each K-tile and converted under the next K-tile's acc1 group):
//   no warning either.
// ORDER 3: the software-pipelined order (wait_group 1, so that the group
//   issued last stays in flight across the back edge): C7514, "wgmma.mma_async
//   instructions are serialized due to non wgmma instructions reading
//   accumulator registers of a wgmma between start and end of the pipeline
//   stage". (2026-11-27, stop 31; docs/performance.md.)
#include "cute/arch/mma_sm90.hpp"
#include "cute/atom/mma_atom.hpp"
#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"

#ifndef ORDER
#define ORDER 1
#endif

using namespace cute;

constexpr int TM = 64, TN = 128, TK = 128, STAGES = 2;
using Atom = decltype(GMMA::ss_op_selector<int8_t, int8_t, int32_t, Shape<Int<TM>, Int<TN>, Int<TK>>>());
using TiledMma = decltype(make_tiled_mma(Atom{}));
using SmemLayoutA =
    decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<int8_t>{}, make_shape(Int<TM>{}, Int<TK>{}, Int<STAGES>{})));
using SmemLayoutB =
    decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<int8_t>{}, make_shape(Int<TN>{}, Int<TK>{}, Int<STAGES>{})));

// One K-tile's wgmma of stage s into acc (from zero when fresh), committed as one group.
template <class Acc, class FA, class FB>
__device__ __forceinline__ void issue(TiledMma& mma, FA const& a, FB const& b, int s, Acc& acc, bool fresh = true) {
  warpgroup_fence_operand(acc);
  warpgroup_arrive();
  mma.accumulate_ = fresh ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
  CUTLASS_PRAGMA_UNROLL
  for (int kb = 0; kb < size<2>(a); ++kb) {
    cute::gemm(mma, a(_, _, kb, s), b(_, _, kb, s), acc);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(acc);
}

// total += float(acc) 2^e: a K-tile's exact int32 sum, scaled by its exponents.
template <class Acc, class Tot>
__device__ __forceinline__ void convert(Acc& acc, Tot& total, int e) {
  warpgroup_fence_operand(acc);
  const float w = __int_as_float((e + 127) << 23);
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(acc); ++i) total(i) = fmaf(float(acc(i)), w, total(i));
  warpgroup_fence_operand(acc);
}

__global__ void __launch_bounds__(128, 1) overlap(float* out, const int* exps, int ktiles) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) int8_t smem[];
  Tensor sA = make_tensor(make_smem_ptr(smem), SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(smem + cosize_v<SmemLayoutA>), SmemLayoutB{});
  TiledMma mma;
  auto thr = mma.get_thread_slice(threadIdx.x);
  Tensor a = thr.make_fragment_A(thr.partition_A(sA));
  Tensor b = thr.make_fragment_B(thr.partition_B(sB));
  Tensor acc0 = partition_fragment_C(mma, Shape<Int<TM>, Int<TN>>{});
  Tensor acc1 = make_fragment_like(acc0);
  Tensor total = make_tensor<float>(shape(acc0));
  clear(total);
  issue(mma, a, b, 0, acc0);
  int kt = 1;
#if ORDER == 1
  warpgroup_wait<0>();
  for (; kt + 1 < ktiles; kt += 2) {
    issue(mma, a, b, 1, acc1);           // K-tile kt into acc1 ...
    convert(acc0, total, exps[kt - 1]);  // ... while kt - 1's (retired) is converted
    warpgroup_wait<0>();
    issue(mma, a, b, 0, acc0);           // kt + 1 into acc0 ...
    convert(acc1, total, exps[kt]);      // ... while kt's is converted
    warpgroup_wait<0>();
  }
#elif ORDER == 2
  warpgroup_wait<0>();
  for (; kt < ktiles; ++kt) {
    issue(mma, a, b, 1, acc1, kt % 8 == 1);  // the corrections of K-tile kt ...
    convert(acc0, total, exps[kt - 1]);      // ... under which kt - 1's hi*hi is promoted
    issue(mma, a, b, 0, acc0);               // hi*hi of kt, fresh
    warpgroup_wait<0>();
    if (kt % 8 == 0) convert(acc1, total, exps[kt]);
  }
#else
  for (; kt + 1 < ktiles; kt += 2) {
    issue(mma, a, b, 1, acc1);
    warpgroup_wait<1>();  // kt - 1's group retired, kt's in flight across the back edge
    convert(acc0, total, exps[kt - 1]);
    issue(mma, a, b, 0, acc0);
    warpgroup_wait<1>();
    convert(acc1, total, exps[kt]);
  }
  warpgroup_wait<0>();
#endif
  convert(acc0, total, exps[kt - 1]);
  for (int i = 0; i < size(total); ++i) out[threadIdx.x * size(total) + i] = total(i);
#endif
}
