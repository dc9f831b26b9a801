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
// ends with those exponents, int32 (batch, rows); k_out up to
// kSplitExpBlockMaxK (past kSplitExpMaxK the kernel's block form). has_exp
// 3: as 2, and auto's row statistics found in the same read (SplitProblem::
// stats_out): IN has, after x, the probe float32 (batch, k); OUT ends, after the
// exponents, with the statistics float32 (8, batch, rows) (stats/params.h:
// max |a|, min nonzero |a| (inf: none), sum |a|, bad, sum t, sum |t|,
// max |t|, sum |t|^(1/8), t = a v), each row's in the kernel's order (below:
// row_stats). Exit status 2 with a message on bad input, 3 where the host
// code disagrees with itself (8 values per task against 4; a statistics'
// max |a| that is not the row's largest finite |x|).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../ffi/fused/split.cuh"

using namespace jaxemu::fused;

// One lane's partial statistics of a row, stats::RowPartial<true>'s rules
// and operations in float32 (that struct is device code: root8 is the
// special-function unit's approximation, which the host does not have).
struct Partial {
  float amax = 0.f, amin = INFINITY, l1 = 0.f, bad = 0.f, y = 0.f, z = 0.f, m = 0.f, q = 0.f;
  void add(float a, float v) {
    const bool finite = std::fabs(a) < INFINITY;
    bad = finite ? bad : 1.f;
    a = finite ? a : 0.f;
    const float x = std::fabs(a);
    amax = std::fmax(amax, x);
    amin = std::fmin(amin, x > 0.f ? x : INFINITY);
    l1 += x;
    const float t = a * v, at = std::fabs(t);
    y += t;
    z += at;
    m = std::fmax(m, at);
    // The device's root8 is 2^(lg2.approx(x) / 8) by ex2.approx (device
    // only, ~1e-7 relative): the host's IEEE powf differs from it in the
    // last bits, so q is the one statistic that is not the kernel's bits.
    q += std::pow(at, 0.125f);
  }
  void merge(const Partial& o) {
    amax = std::fmax(amax, o.amax);
    amin = std::fmin(amin, o.amin);
    l1 += o.l1;
    bad = std::fmax(bad, o.bad);
    y += o.y;
    z += o.z;
    m = std::fmax(m, o.m);
    q += o.q;
  }
};

// The kernels' butterfly over groups of `width` consecutive partials
// (ffi/fused_dispatch.cu: merge_lanes, xor shuffles): at each offset o =
// width / 2 .. 1 every partial l merges partial l ^ o's (a + b and b + a
// are the same float, so all of a group agree).
static void butterfly(std::vector<Partial>& lane, size_t width) {
  for (size_t o = width / 2; o > 0; o /= 2) {
    std::vector<Partial> next = lane;
    for (size_t l = 0; l < lane.size(); ++l) next[l].merge(lane[l ^ o]);
    lane = next;
  }
}

// Row row_id's statistics as the split that finds exponents computes them
// with stats_out (ffi/fused_dispatch.cu: row_tasks_stats): its Lanes
// threads (split_exp_shape), thread l's tasks i = 0 .. Tasks - 1 the row's
// groups i Lanes + l of 8 values, added in order with the probe's values
// at the same K (zeros past k, the padding and the tasks past the row's end
// included), then the butterfly over each warp's lanes (Lanes of them, or
// 32). Up to kSplitExpMaxK (split_rows_exp_kernel) lane 0's is the row's;
// past it (split_rows_exp_block_kernel, 256 threads) the 8 warps' partials
// meet in a butterfly of their own (warp 0's lanes 0..7 reading warps
// 0..7's: the pairwise tree ((w0 + w4) + (w2 + w6)) + ((w1 + w5) + (w3 +
// w7))), and its first is the row's.
static Partial row_stats(const SplitProblem& p, int64_t row_id) {
  const int64_t groups = p.k_out / 8;
  const SplitExpShape s = split_exp_shape(groups);
  const int64_t b = row_id / p.rows;
  std::vector<Partial> lane(size_t(s.lanes));
  for (int l = 0; l < s.lanes; ++l)
    for (int i = 0; i < s.tasks; ++i) {
      const int64_t g = int64_t(i) * s.lanes + l, k0 = g < groups ? g * 8 : p.k;
      float w[8], v[8];
      load_row_values<8>(p, row_id, k0, w);
      load_values<8>(p.probe, p.k, b, k0, v);
      for (int j = 0; j < 8; ++j) lane[size_t(l)].add(w[j], v[j]);
    }
  butterfly(lane, size_t(std::min(s.lanes, 32)));
  if (s.lanes <= 32) return lane[0];
  std::vector<Partial> warps;
  for (size_t w = 0; w < lane.size(); w += 32) warps.push_back(lane[w]);
  butterfly(warps, warps.size());
  return warps[0];
}

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
  const bool find_exp = h[9] == 2 || h[9] == 3, stats = h[9] == 3;
  if (find_exp && (p.transposed || p.type != SliceType::kFP16 || p.k_out > kSplitExpBlockMaxK)) {
    std::fprintf(stderr, "finding exponents: fp16 rows of K_out <= %d values\n", kSplitExpBlockMaxK);
    return 2;
  }
  std::vector<float> probe(size_t(stats ? p.batch * p.k : 0) + 1);
  if (std::fread(x.data(), 4, x.size() - 1, in) != x.size() - 1 ||
      (h[9] == 1 && std::fread(exps.data(), 4, exps.size() - 1, in) != exps.size() - 1) ||
      std::fread(probe.data(), 4, probe.size() - 1, in) != probe.size() - 1) {
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
  std::vector<float> row_stats_out(size_t(stats ? 8 * p.batch * p.rows : 0));
  if (stats) {
    p.probe = probe.data();
    p.stats_out = row_stats_out.data();
    p.stats_probe = true;
  }
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
      if (stats) {  // (8, batch, rows): the row kernel's layout (stats::store)
        const Partial st = row_stats(p, row_id);
        const float f[8] = {st.amax, st.amin, st.l1, st.bad, st.y, st.z, st.m, st.q};
        for (int q = 0; q < 8; ++q) p.stats_out[size_t(q * p.batch * p.rows + row_id)] = f[q];
        if (jaxemu::bits_of(st.amax) != finite_max) {  // the kernel's amax is its finite_max's float
          std::fprintf(stderr, "row %lld: amax is not the largest finite |x|\n", (long long)row_id);
          return 3;
        }
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
  if (std::fwrite(row_stats_out.data(), 4, row_stats_out.size(), o) != row_stats_out.size()) return 2;
  std::fclose(o);
  return 0;
}
