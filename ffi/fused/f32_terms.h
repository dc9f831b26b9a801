// The FP32-operand kernels' term order (traits_f32.cuh), in plain C++ for
// the host too (tests/native/kernel_check.cu builds its term tables with it).
#pragma once

namespace jaxemu {
namespace fused {

// The k-th term (smallest first) of a kernel with sa x sb slices and
// `terms` terms: the first `terms` slice pairs (i, j) by level i + j (then
// by i) are the scheme's, listed from the highest level down, by i within a
// level: jaxemu/backends/cuda_fused.py's terms_of for every F32
// configuration (bf16x3, bf16x6, bf16x9 and their exact-operand forms).
// launch_f32 checks the problem's term table against it where the kernel
// needs the terms at compile time (kRegisterA: slices in registers).
constexpr int f32_pair_rank(int sa, int sb, int i, int j) {  // (i, j)'s place by level, then by i
  int rank = 0;
  for (int l = 0; l <= sa + sb - 2; ++l)
    for (int a = 0; a < sa; ++a) {
      if (l - a < 0 || l - a >= sb) continue;
      if (a == i && l - a == j) return rank;
      ++rank;
    }
  return -1;
}

constexpr int f32_term_pair(int sa, int sb, int terms, int k, bool want_a) {
  int idx = 0;
  for (int l = sa + sb - 2; l >= 0; --l)
    for (int i = 0; i < sa; ++i) {
      const int j = l - i;
      if (j < 0 || j >= sb || f32_pair_rank(sa, sb, i, j) >= terms) continue;
      if (idx == k) return want_a ? i : j;
      ++idx;
    }
  return -1;
}

}  // namespace fused
}  // namespace jaxemu
