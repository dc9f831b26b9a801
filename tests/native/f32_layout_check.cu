// Host check of the FP32-operand kernel's register-A cut (ffi/fused/
// transform.cuh: cut_a_regs), for every F32 configuration with A in
// registers: in each consumer thread's A fragment (the RS wgmma's layout),
// elements 2j and 2j + 1 are K-steps k and k + 1 of one row with k even,
// and in the FP32 stage (128-byte swizzle) they are adjacent floats at an
// 8-byte aligned offset, so that one 8-byte load gives both. And each
// element of the 128 x 32 tile is some thread's, once. No GPU needed:
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -Iffi -I.cutlass/include \
//     tests/native/f32_layout_check.cu -o /tmp/f32_layout_check && /tmp/f32_layout_check
#include <cstdint>
#include <cstdio>
#include <vector>

#include "fused/traits_f32.cuh"

using namespace cute;
using namespace jaxemu::fused;

template <class T>
int check(const char* name) {
  typename T::TiledMma mma;
  Tensor id = make_identity_tensor(Shape<Int<T::kTileM>, Int<T::kTileK>>{});  // (m, k) coordinates
  // a 1024-byte aligned base: the swizzle acts on address bits
  static std::vector<float> store(cosize_v<typename T::SmemLayoutA32> + 256);
  float* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(store.data()) + 1023) & ~uintptr_t(1023));
  Tensor s32 = make_tensor(make_smem_ptr(base), typename T::SmemLayoutA32{});
  std::vector<int> seen(T::kTileM * T::kTileK, 0);
  int bad = 0;
  for (int t = 0; t < 128 * T::kConsumerWarpgroups; ++t) {
    auto thr = mma.get_thread_slice(t);
    Tensor c = thr.partition_A(id);                // (MMA, MMA_M, MMA_K) coordinates
    Tensor a = thr.partition_A(s32(_, _, 0));      // the same elements in stage 0
    for (int j = 0; j < size(c) / 2; ++j) {
      auto c0 = c(2 * j), c1 = c(2 * j + 1);
      const long o0 = long(&a(2 * j) - base), o1 = long(&a(2 * j + 1) - base);
      if (get<0>(c0) != get<0>(c1) || get<1>(c1) != get<1>(c0) + 1 || get<1>(c0) % 2 || o1 != o0 + 1 || o0 % 2) {
        if (bad++ < 5) std::printf("%s: thread %d pair %d: (%d, %d) @%ld, (%d, %d) @%ld\n", name, t, j, int(get<0>(c0)),
                                   int(get<1>(c0)), o0, int(get<0>(c1)), int(get<1>(c1)), o1);
      }
    }
    for (int i = 0; i < size(c); ++i) seen[get<0>(c(i)) * T::kTileK + get<1>(c(i))]++;
  }
  for (int v : seen) bad += v != 1;
  std::printf("%s: %s\n", name, bad ? "FAIL" : "ok");
  return bad != 0;
}

int main() {
  int fails = 0;
  fails += check<TraitsF32<cutlass::bfloat16_t, 2, 2, 3, true>>("s2_t3");
  fails += check<TraitsF32<cutlass::bfloat16_t, 3, 3, 6, true>>("s3_t6");
  fails += check<TraitsF32<cutlass::bfloat16_t, 3, 3, 9, true>>("s3_t9");
  fails += check<TraitsF32<cutlass::bfloat16_t, 1, 2, 2, true>>("s1x2_t2");
  fails += check<TraitsF32<cutlass::bfloat16_t, 2, 1, 2, true>>("s2x1_t2");
  fails += check<TraitsF32<cutlass::bfloat16_t, 1, 3, 3, true>>("s1x3_t3");
  fails += check<TraitsF32<cutlass::bfloat16_t, 3, 1, 3, true>>("s3x1_t3");
  // the term tables (cuda_fused.terms_of, smallest first)
  static_assert(f32_term_pair(3, 3, 6, 0, true) == 0 && f32_term_pair(3, 3, 6, 0, false) == 2, "bf16x6's first term");
  static_assert(f32_term_pair(3, 3, 6, 5, true) == 0 && f32_term_pair(3, 3, 6, 5, false) == 0, "hi*hi last");
  return fails;
}
