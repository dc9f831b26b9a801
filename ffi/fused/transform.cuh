// The FP32-operand kernel's split (traits_f32.cuh): the consumer warpgroups
// cut one FP32 stage (A's 128 x 32 and B's 32 x 128 values) into the slice
// tiles wgmma reads, in shared memory. Each value is cut as split.cuh cuts it
// (slice_of, storage_bits: the same slices, bit for bit, as the split kernel
// writes to global memory).
//
// Who cuts what: consumer warpgroup wg takes A's rows [64 wg, 64 wg + 64)
// (the rows its own wgmma read) and B's columns [64 wg, 64 wg + 64) (both
// warpgroups read all of B: they meet at a barrier before the tile is used,
// mainloop_f32.cuh). Each thread takes four runs of 4 consecutive values
// (16-byte reads: a warp reads four whole 128-byte rows of the stage, free
// of bank conflicts) and writes each slice's 4 values as one 8-byte store
// (contiguous in both slice layouts: 4 K-steps of a K-major A row, 4 columns
// of MN-major B).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"

#include "params.h"
#include "split.cuh"
#include "cutlass/numeric_types.h"
#include <cuda_bf16.h>

namespace jaxemu {
namespace fused {

template <class T>
struct Transform {
  static constexpr int TM = T::kTileM, TN = T::kTileN, TK = T::kTileK, SA = T::kSlicesA, SB = T::kSlicesB;
  static constexpr int kRowsPerGroup = TM / T::kConsumerWarpgroups, kColsPerGroup = TN / T::kConsumerWarpgroups;
  static constexpr int kRunsA = kRowsPerGroup * TK / 4 / 128, kRunsB = kColsPerGroup * TK / 4 / 128;
  static_assert(kRunsA * 4 * 128 == kRowsPerGroup * TK && kRunsB * 4 * 128 == kColsPerGroup * TK,
                "whole runs of 4 values per thread");
  static_assert(std::is_same_v<typename T::Element, cutlass::bfloat16_t>, "bf16 slices (traits_f32.cuh)");
  // One FP32 stage, one slice tile (elements): consecutive stages and slices
  // lie this far apart, a multiple of the swizzle pattern's period, so an
  // offset within stage 0 / slice 0 plus a multiple of these is the address.
  static constexpr int kStageA32 = int(cosize_v<typename T::SmemTileA32>);
  static constexpr int kStageB32 = int(cosize_v<typename T::SmemTileB32>);
  static constexpr int kSliceA = TM * TK, kSliceB = TN * TK;

  // This thread's runs as element offsets at stage 0, slice 0 (computed once:
  // the swizzled layouts' arithmetic then costs one add per access).
  // With A's slices in registers: the FP32 stage offset of each pair of
  // this thread's A fragment elements (cut_a_regs).
  static constexpr int kPairsA = TM * TK / (128 * T::kConsumerWarpgroups) / 2;
  struct Offsets {
    int a32[kRunsA], a[kRunsA], b32[kRunsB], b[kRunsB], ra32[kPairsA];
  };
  static __device__ __forceinline__ Offsets offsets(typename T::SharedStorage& smem) {
    const int wg = int(threadIdx.x) / 128 - 1, t = int(threadIdx.x) % 128;
    Tensor sA32 = make_tensor(make_smem_ptr(smem.a32.data()), typename T::SmemLayoutA32{});  // (TM, TK, stage)
    Tensor sB32 = make_tensor(make_smem_ptr(smem.b32.data()), typename T::SmemLayoutB32{});  // (TN, TK, stage)
    Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename T::SmemLayoutA{});        // (TM, TK, slice + SA buf)
    Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename T::SmemLayoutB{});        // (TN, TK, slice + SB buf)
    Offsets o;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kRunsA; ++j) {
      const int f = t + 128 * j;  // run f: row f / (TK / 4), K-steps 4 (f % (TK / 4)) ..
      const int r = wg * kRowsPerGroup + f / (TK / 4), k = 4 * (f % (TK / 4));
      o.a32[j] = int(&sA32(r, k, 0) - smem.a32.data());
      o.a[j] = int(&sA(r, k, 0) - smem.a.data());
    }
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kRunsB; ++j) {
      const int f = t + 128 * j;  // run f: K-step f / (cols / 4), columns 4 (f % (cols / 4)) ..
      const int k = f / (kColsPerGroup / 4), c = wg * kColsPerGroup + 4 * (f % (kColsPerGroup / 4));
      o.b32[j] = int(&sB32(c, k, 0) - smem.b32.data());
      o.b[j] = int(&sB(c, k, 0) - smem.b.data());
    }
    if constexpr (T::kRegisterA) {
      // (Offsets from the array's own pointer: loads the compiler sees as
      // shared-memory ones, LDS; through the swizzled tensor they were
      // generic.)
      typename T::TiledMma mma;
      Tensor tA32 = mma.get_thread_slice(threadIdx.x - 128).partition_A(sA32(_, _, 0));  // (MMA, MMA_M, MMA_K)
      static_assert(int(size(decltype(tA32){})) == 2 * kPairsA, "A fragment size");
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kPairsA; ++j) o.ra32[j] = int(&tA32(2 * j) - smem.a32.data());
    }
    return o;
  }

  // The slices of 4 values, two per 32-bit word (the low half the first):
  // s_i = bf16(r_i) to nearest even, r_{i+1} = (r_i - s_i) 2^lo_scale_bits,
  // two values per conversion instruction. This is split.cuh's slice_of for
  // every value it gives a finite result (|r| below the midpoint of bf16's
  // largest finite value and 2^128, the same bits); beyond it (and for NaN)
  // the hardware gives Inf (NaN), the entries of C that read it are not
  // finite, and kernel_f32.cuh's fix-up gives them their FP32 values, which
  // is what FP32's rules ask for there.
  template <int kSlices>
  static __device__ __forceinline__ void cut2(float step, float x0, float x1, uint32_t (&out)[kSlices]) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kSlices; ++i) {
      const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
      out[i] = *reinterpret_cast<const uint32_t*>(&h);
      if (i + 1 < kSlices) {
        x0 = (x0 - __uint_as_float(out[i] << 16)) * step;
        x1 = (x1 - __uint_as_float(out[i] & 0xFFFF0000u)) * step;
      }
    }
  }

  template <int kSlices>
  static __device__ __forceinline__ void cut4(float step, float4 v, uint2 (&out)[kSlices]) {
    uint32_t lo[kSlices], hi[kSlices];
    cut2<kSlices>(step, v.x, v.y, lo);
    cut2<kSlices>(step, v.z, v.w, hi);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kSlices; ++i) out[i] = make_uint2(lo[i], hi[i]);
  }

  // FP32 stage `stage` -> slice buffer `buf`, this thread's share: A's rows
  // (unless A's slices live in registers: cut_a_regs), then B's columns.
  static __device__ __forceinline__ void run(SplitProblem const& sp, typename T::SharedStorage& smem,
                                             Offsets const& o, int stage, int buf) {
    const float step = pow2f(sp.lo_scale_bits);
    if constexpr (!T::kRegisterA) {
      const float* a32 = smem.a32.data() + stage * kStageA32;
      auto* a = reinterpret_cast<uint16_t*>(smem.a.data()) + SA * buf * kSliceA;
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kRunsA; ++j) {
        uint2 w[SA];
        cut4<SA>(step, *reinterpret_cast<float4 const*>(a32 + o.a32[j]), w);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < SA; ++i) *reinterpret_cast<uint2*>(a + o.a[j] + i * kSliceA) = w[i];
      }
    }
    const float* b32 = smem.b32.data() + stage * kStageB32;
    auto* b = reinterpret_cast<uint16_t*>(smem.b.data()) + SB * buf * kSliceB;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kRunsB; ++j) {
      uint2 w[SB];
      cut4<SB>(step, *reinterpret_cast<float4 const*>(b32 + o.b32[j]), w);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < SB; ++i) *reinterpret_cast<uint2*>(b + o.b[j] + i * kSliceB) = w[i];
    }
  }

  // A's slices into registers (T::kRegisterA): this thread's FP32 values of
  // stage `stage` in its A fragment's order (Offsets::ra32: thr_mma's
  // partition_A of the stage), cut into the SA fragments `dst` that the RS
  // wgmma reads. Fragment elements 2j and 2j + 1 are K-steps k and k + 1 of
  // one row, k even (wgmma's A register layout), adjacent in the stage: one
  // 8-byte read gives both, and their slices fill one 32-bit register each
  // (tests/native/f32_layout_check.cu checks this on the host).
  template <class Frag>
  static __device__ __forceinline__ void cut_a_regs(float step, typename T::SharedStorage& smem, Offsets const& o,
                                                    int stage, Frag (&dst)[SA]) {
    const float* a32 = smem.a32.data() + stage * kStageA32;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kPairsA; ++j) {
      const float2 v = *reinterpret_cast<float2 const*>(a32 + o.ra32[j]);
      uint32_t w[SA];
      cut2<SA>(step, v.x, v.y, w);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < SA; ++i) recast<uint32_t>(dst[i])(j) = w[i];
    }
  }
};

}  // namespace fused
}  // namespace jaxemu
