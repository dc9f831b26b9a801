// What the statistics kernels (row_stats.cuh, col_stats.cuh) do per value:
// 16-byte loads of float32, float16 or bfloat16, the finite-value rule and
// the per-row and per-column accumulators.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace jaxemu {
namespace stats {

template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ float to_float<__half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

// Values per 16-byte load.
template <typename T>
constexpr int kVec = 16 / int(sizeof(T));

template <typename T>
union Vector {
  uint4 u;
  T x[kVec<T>];
};

// All kVec values +0 (a one-hot matrix is almost only such vectors: they add
// nothing to any statistic and are skipped).
__device__ __forceinline__ bool all_zero(const uint4& u) { return (u.x | u.y | u.z | u.w) == 0u; }

// x^(1/8) for x >= 0 as 2^(log2(x) / 8), by the special-function unit's
// approximations (relative error ~1e-7; 0 gives 0): two instructions where
// three IEEE square roots cost ~30. It only weighs the probe's terms
// (auto.py: MIN_TERMS), a heuristic count. Flushed to zero (.ftz): a
// subnormal x (a product |a v| below 2^-126) counts 0 instead of 2^-15.75 or
// less, so the count can only fall (auto refuses more, never less); without
// .ftz each approximation carries its subnormal handling, 7 instructions
// per value more in an issue-bound kernel (H200 ncu, stop 56: the row
// statistics kernel at 86 % of the SM's issue, 46 % of DRAM's bandwidth).
// For a normal x both give the bits they gave before: lg2 then takes no
// subnormal path, and ex2 gets an argument >= -15.75 (-inf for 0 or a
// flushed x, giving 0 as before).
__device__ __forceinline__ float root8(float x) {
  float l, r;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(l) : "f"(x));
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(l * 0.125f));
  return r;
}

// max |x|, min nonzero |x| (inf: none) and sum |x| of finite values, and
// whether any value was NaN or +-Inf (bad: 1, else 0). The sums stay in
// float32 (float64 sums ran at half the memory speed on an H100: the
// conversions, not the adds, cost): each thread's chain is short and known
// (jaxemu/backends/cuda_stats.py: probe_roundings).
struct Extremes {
  float amax = 0.f, amin = INFINITY, l1 = 0.f, bad = 0.f;

  // Any value a; returns it with NaN and +-Inf as 0, as they count in every
  // statistic (auto.py: operand_stats).
  __device__ __forceinline__ float add(float a) {
    const bool finite = fabsf(a) < INFINITY;
    bad = finite ? bad : 1.f;
    a = finite ? a : 0.f;
    const float x = fabsf(a);
    amax = fmaxf(amax, x);
    amin = fminf(amin, x > 0.f ? x : INFINITY);
    l1 += x;
    return a;
  }
  __device__ __forceinline__ void merge(const Extremes& o) {
    amax = fmaxf(amax, o.amax);
    amin = fminf(amin, o.amin);
    l1 += o.l1;
    bad = fmaxf(bad, o.bad);
  }
  // Every field through `shfl` (a warp shuffle of one float).
  template <typename Shfl>
  __device__ __forceinline__ Extremes shuffled(Shfl shfl) const {
    Extremes o;
    o.amax = shfl(amax);
    o.amin = shfl(amin);
    o.l1 = shfl(l1);
    o.bad = shfl(bad);
    return o;
  }
  __device__ __forceinline__ Extremes shfl_down(int d) const {
    return shuffled([d](float x) { return __shfl_down_sync(0xffffffffu, x, d); });
  }
  // The partner lane's (lane ^ lane_mask): merged with it by every lane, a
  // butterfly leaves all lanes of a group with the same merge, as merge's
  // sums commute (a + b and b + a are the same float).
  __device__ __forceinline__ Extremes shfl_xor(int lane_mask) const {
    return shuffled([lane_mask](float x) { return __shfl_xor_sync(0xffffffffu, x, lane_mask); });
  }
};

}  // namespace stats
}  // namespace jaxemu
