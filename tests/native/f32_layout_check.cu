// Host check of the FP32-operand kernel's register-A cut (ffi/fused/
// transform.cuh: cut_a_regs), for every F32 configuration with A in
// registers: in each consumer thread's A fragment (the RS wgmma's layout),
// elements 2j and 2j + 1 are K-steps k and k + 1 of one row with k even,
// and in the FP32 stage (128-byte swizzle) they are adjacent floats at an
// 8-byte aligned offset, so that one 8-byte load gives both. And each
// element of the 128 x 32 tile is some thread's, once. Then, for every
// configuration, the cut's runs (transform.cuh: Transform::run_a / run_b):
// in each of the four layouts (FP32 stages, slice tiles of A and B) a
// thread's run j lies at its run 0's offset plus j times the constant the
// kernel adds (kRunA32, kRunA, kRunB32, kRunB), and the runs cover each
// tile once; tf32's transposing cut of B likewise (its per-K-step stage
// offsets, 16-byte K-major slice stores). No GPU needed:
//   nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -Iffi -I.cutlass/include \
//     tests/native/f32_layout_check.cu -o /tmp/f32_layout_check && /tmp/f32_layout_check
#include <cstdint>
#include <cstdio>
#include <vector>

#include "fused/traits_f32.cuh"
#include "fused/transform.cuh"

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

// A 1024-byte aligned array of n elements: the swizzles act on address bits.
template <class E>
E* aligned(std::vector<char>& store, size_t n) {
  store.assign(n * sizeof(E) + 1024, 0);
  return reinterpret_cast<E*>((reinterpret_cast<uintptr_t>(store.data()) + 1023) & ~uintptr_t(1023));
}

template <class T>
int check_runs(const char* name) {
  using X = Transform<T>;
  using E = typename T::Element;
  std::vector<char> s0, s1, s2, s3;
  float* a32 = aligned<float>(s0, cosize_v<typename T::SmemLayoutA32>);
  float* b32 = aligned<float>(s1, cosize_v<typename T::SmemLayoutB32>);
  E* a = aligned<E>(s2, cosize_v<typename T::SmemLayoutA>);
  E* b = aligned<E>(s3, cosize_v<typename T::SmemLayoutB>);
  Tensor sA32 = make_tensor(make_smem_ptr(a32), typename T::SmemLayoutA32{});
  Tensor sB32 = make_tensor(make_smem_ptr(b32), typename T::SmemLayoutB32{});
  Tensor sA = make_tensor(make_smem_ptr(a), typename T::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(b), typename T::SmemLayoutB{});
  std::vector<int> seen_a(T::kTileM * T::kTileK, 0), seen_b(T::kTileN * T::kTileK, 0);
  int bad = 0;
  auto expect = [&](bool ok, int wg, int t, int j, const char* what) {
    if (!ok && bad++ < 5) std::printf("%s: warpgroup %d thread %d run %d: %s\n", name, wg, t, j, what);
  };
  for (int wg = 0; wg < T::kConsumerWarpgroups; ++wg)
    for (int t = 0; t < 128; ++t) {
      const auto a0 = X::run_a(wg, t, 0), b0 = X::run_b(wg, t, 0);
      for (int j = 0; j < X::kRunsA; ++j) {
        const auto r = X::run_a(wg, t, j);
        expect(&sA32(r.r, r.k, 0) - a32 == (&sA32(a0.r, a0.k, 0) - a32) + j * X::kRunA32, wg, t, j, "A's stage");
        expect(&sA(r.r, r.k, 0) - a == (&sA(a0.r, a0.k, 0) - a) + j * X::kRunA, wg, t, j, "A's slice tile");
        for (int q = 0; q < 4; ++q) {  // 4 consecutive K-steps, contiguous in both (one 16-byte load, one 8-byte store)
          expect(&sA32(r.r, r.k + q, 0) == &sA32(r.r, r.k, 0) + q && &sA(r.r, r.k + q, 0) == &sA(r.r, r.k, 0) + q,
                 wg, t, j, "A's run not contiguous");
          seen_a[r.r * T::kTileK + r.k + q]++;
        }
      }
      for (int j = 0; j < X::kRunsA; ++j) {  // (16-byte stores of tf32, 8-byte of 16-bit slices: 4 elements)
        const auto r = X::run_a(wg, t, j);
        expect((&sA(r.r, r.k, 0) - a) % 4 == 0, wg, t, j, "A's slice store not aligned");
      }
      if constexpr (T::kTf32) {  // B's transposing cut (run_b_tf32): 4 K-steps of one column per run
        const auto r0 = X::run_b_tf32_at(wg, t, 0);
        for (int j = 0; j < X::kRunsB; ++j) {
          const auto r = X::run_b_tf32_at(wg, t, j);
          expect(r.r == r0.r && r.k % 4 == 0 && (&sB(r.r, r.k, 0) - b) % 4 == 0, wg, t, j, "B's tf32 run");
          for (int q = 0; q < 4; ++q) {
            expect(&sB32(r.r, r.k + q, 0) - b32 == (&sB32(r0.r, r0.k + q, 0) - b32) + j * X::kRunBT32, wg, t, j,
                   "B's stage (tf32)");
            expect(&sB(r.r, r.k + q, 0) == &sB(r.r, r.k, 0) + q, wg, t, j, "B's tf32 slice run not contiguous");
            seen_b[r.r * T::kTileK + r.k + q]++;
          }
        }
      } else {
        for (int j = 0; j < X::kRunsB; ++j) {
          const auto r = X::run_b(wg, t, j);
          expect(&sB32(r.r, r.k, 0) - b32 == (&sB32(b0.r, b0.k, 0) - b32) + j * X::kRunB32, wg, t, j, "B's stage");
          expect(&sB(r.r, r.k, 0) - b == (&sB(b0.r, b0.k, 0) - b) + j * X::kRunB, wg, t, j, "B's slice tile");
          expect(r.r - b0.r == 0, wg, t, j, "B's runs on other columns (Scales)");
          for (int q = 0; q < 4; ++q) {  // 4 consecutive columns
            expect(&sB32(r.r + q, r.k, 0) == &sB32(r.r, r.k, 0) + q && &sB(r.r + q, r.k, 0) == &sB(r.r, r.k, 0) + q,
                   wg, t, j, "B's run not contiguous");
            seen_b[(r.r + q) * T::kTileK + r.k]++;
          }
        }
      }
    }
  for (int v : seen_a) bad += v != 1;
  for (int v : seen_b) bad += v != 1;
  std::printf("%s runs: %s\n", name, bad ? "FAIL" : "ok");
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
  // the cut's runs, every configuration (cuda_fused.F32_KERNELS; A in
  // shared memory, bf16 and fp16, and in registers)
  fails += check_runs<TraitsF32<cutlass::bfloat16_t, 2, 2, 3>>("bf16 s2_t3");
  fails += check_runs<TraitsF32<cutlass::bfloat16_t, 3, 3, 6>>("bf16 s3_t6");
  fails += check_runs<TraitsF32<cutlass::bfloat16_t, 3, 3, 9>>("bf16 s3_t9");
  fails += check_runs<TraitsF32<cutlass::bfloat16_t, 1, 2, 2>>("bf16 s1x2_t2");
  fails += check_runs<TraitsF32<cutlass::bfloat16_t, 2, 1, 2>>("bf16 s2x1_t2");
  fails += check_runs<TraitsF32<cutlass::bfloat16_t, 1, 3, 3>>("bf16 s1x3_t3");
  fails += check_runs<TraitsF32<cutlass::bfloat16_t, 3, 1, 3>>("bf16 s3x1_t3");
  fails += check_runs<TraitsF32<cutlass::bfloat16_t, 3, 3, 6, true>>("bf16 s3_t6 register A");
  fails += check_runs<TraitsF32<cutlass::half_t, 2, 2, 1, false, 2>>("fp16 s2_t1_2");
  fails += check_runs<TraitsF32<cutlass::half_t, 1, 2, 1, false, 1>>("fp16 s1x2_t1_1");
  fails += check_runs<TraitsF32<cutlass::half_t, 2, 1, 1, false, 1>>("fp16 s2x1_t1_1");
  fails += check_runs<TraitsF32<cutlass::tfloat32_t, 2, 2, 3>>("tf32 s2_t3");
  fails += check_runs<TraitsF32<cutlass::tfloat32_t, 1, 2, 2>>("tf32 s1x2_t2");
  fails += check_runs<TraitsF32<cutlass::tfloat32_t, 2, 1, 2>>("tf32 s2x1_t2");
  // the term tables (cuda_fused.terms_of, smallest first)
  static_assert(f32_term_pair(3, 3, 6, 0, true) == 0 && f32_term_pair(3, 3, 6, 0, false) == 2, "bf16x6's first term");
  static_assert(f32_term_pair(3, 3, 6, 5, true) == 0 && f32_term_pair(3, 3, 6, 5, false) == 0, "hi*hi last");
  return fails;
}
