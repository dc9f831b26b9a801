// Runs the fused path's split kernels' per-thread code (ffi/fused/split.cuh)
// on the host, over every task of a problem, for tests/test_fused_layout.py:
//   split_check IN OUT
// IN: int64 header [slice_type (0 bf16, 1 fp16, 2 tf32), slices,
// lo_scale_bits, truncate, transposed, batch, rows, k, k_out, has_exp], then
// x float32 ((batch, rows, k), or (batch, k, rows) when transposed) and, if
// has_exp is 1, the row exponents int32 (batch, rows); OUT: the slices' bytes
// (batch, rows, k_out / TK, slices, TK) in the slice format. The output
// starts poisoned (0x5A), so an entry no task writes shows. has_exp 2: the
// exponents found as split_rows_exp_kernel finds them (each row's largest
// finite |x|, fp16_row_exponent), then the row's slices with them, and OUT
// ends with those exponents, int32 (batch, rows). Exit status 2 with a
// message on bad input.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../ffi/fused/split.cuh"

using namespace jaxemu::fused;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: split_check IN OUT\n");
    return 2;
  }
  std::FILE* in = std::fopen(argv[1], "rb");
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", argv[1]);
    return 2;
  }
  int64_t h[10];
  if (std::fread(h, sizeof(int64_t), 10, in) != 10) return 2;
  SplitProblem p;
  if (h[0] < 0 || h[0] > 2 || h[1] < 1 || h[1] > kMaxSlices || h[2] < 0 || h[2] > 14 || h[5] < 0 || h[6] < 0 ||
      h[7] < 0) {
    std::fprintf(stderr, "bad slice type, count, lo_scale_bits or shape\n");
    return 2;
  }
  p.type = h[0] == 0 ? SliceType::kBF16 : h[0] == 1 ? SliceType::kFP16 : SliceType::kTF32;
  p.slices = int(h[1]);
  p.lo_scale_bits = int(h[2]);
  p.truncate = h[3] != 0;
  p.transposed = h[4] != 0;
  p.batch = h[5];
  p.rows = h[6];
  p.k = h[7];
  p.k_out = h[8];
  const int tk = split_tile_k(p.type);
  if (p.k_out < p.k || p.k_out % tk) {
    std::fprintf(stderr, "k_out must cover k and be a multiple of %d\n", tk);
    return 2;
  }
  std::vector<float> x(size_t(p.batch * p.rows * p.k) + 1);
  std::vector<int32_t> exps(size_t(p.batch * p.rows) + 1);
  const bool find_exp = h[9] == 2;
  if (find_exp && (p.transposed || p.type != SliceType::kFP16 || p.k_out > kSplitExpMaxK)) {
    std::fprintf(stderr, "finding exponents: fp16 rows of up to %d values\n", kSplitExpMaxK);
    return 2;
  }
  if (std::fread(x.data(), 4, x.size() - 1, in) != x.size() - 1 ||
      (h[9] == 1 && std::fread(exps.data(), 4, exps.size() - 1, in) != exps.size() - 1)) {
    std::fprintf(stderr, "short input\n");
    return 2;
  }
  std::fclose(in);
  const size_t bytes = size_t(p.batch * p.rows * p.k_out * p.slices) * (p.type == SliceType::kTF32 ? 4 : 2);
  const uint32_t poison = 0x5A5A5A5Au;
  std::vector<uint4> out((bytes + 15) / 16 + 1, make_uint4(poison, poison, poison, poison));  // 16-byte aligned
  p.x = x.data();
  p.exp = h[9] == 1 ? exps.data() : nullptr;
  p.out = out.data();
  if (find_exp) {
    // The device kernel's work per row, in its order of tasks: the row's
    // values, their largest finite |x| and its exponent, then the slices.
    p.exp_out = exps.data();
    const int64_t groups = p.k_out / 8;
    std::vector<float> v(size_t(groups * 8));
    for (int64_t row_id = 0; row_id < p.batch * p.rows; ++row_id) {
      uint32_t finite_max = 0;
      for (int64_t g = 0; g < groups; ++g) {
        float w[8];
        load_row_values<8>(p, row_id, g * 8, w);
        for (int j = 0; j < 8; ++j) {
          v[size_t(g * 8 + j)] = w[j];
          finite_max = std::max(finite_max, finite_abs_bits(w[j]));
        }
      }
      const int e = fp16_row_exponent(finite_max);
      p.exp_out[row_id] = e;
      for (int64_t g = 0; g < groups; ++g) {
        float w[8];
        for (int j = 0; j < 8; ++j) w[j] = v[size_t(g * 8 + j)];
        write_slices<8>(p, w, e, row_id, g * 8);
      }
    }
  } else if (!p.transposed) {
    for (int64_t t = 0; t < p.batch * p.rows * (p.k_out / 4); ++t) split_rows_task(p, t);
    // The device kernel's 8 values per task must write the same bytes.
    std::vector<uint4> out8(out.size(), make_uint4(poison, poison, poison, poison));
    SplitProblem p8 = p;
    p8.out = out8.data();
    for (int64_t t = 0; t < p.batch * p.rows * (p.k_out / 8); ++t) split_rows_task<8>(p8, t);
    if (std::memcmp(out.data(), out8.data(), bytes) != 0) {
      std::fprintf(stderr, "8 values per task wrote other bytes than 4\n");
      return 3;
    }
  } else {
    // The transposed kernel's tasks, each reading its column of x directly
    // instead of from the shared-memory tile the device stages.
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t r = 0; r < p.rows; ++r)
        for (int64_t k0 = 0; k0 < p.k_out; k0 += 16) {
          int64_t valid = p.k - k0;
          valid = valid < 0 ? 0 : valid > 16 ? 16 : valid;
          const float* col = valid ? x.data() + (b * p.k + k0) * p.rows + r : x.data();
          split_transposed_task(p, b, r, k0, col, p.rows, int(valid));
        }
  }
  std::FILE* o = std::fopen(argv[2], "wb");
  if (!o || std::fwrite(out.data(), 1, bytes, o) != bytes) return 2;
  if (find_exp && std::fwrite(exps.data(), 4, exps.size() - 1, o) != exps.size() - 1) return 2;
  std::fclose(o);
  return 0;
}
