// Runs the Ozaki II residue kernels' per-thread code (ffi/int8/residues.cuh)
// on the host, over every task of a problem, for tests/test_int8_host.py:
//   residue_check IN OUT
// IN: int64 header [f64, transposed, batch, rows, k, rows_out, k_out, nmod,
// moduli...], then x (float32 or float64: (batch, rows, k), or (batch, k,
// rows) when transposed) and the exponents int32 (batch, rows);
// OUT: int8 residues (nmod, batch, rows_out, k_out). The output starts
// poisoned (0x5A), so an entry no task writes shows. Exit status 2 with a
// message on bad input.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../../ffi/int8/residues.cuh"
#include "../../ffi/int8/tables.h"

using namespace jaxemu::int8;

template <class T>
void run_on_host(const ResidueProblem& p) {
  const T* x = static_cast<const T*>(p.x);
  if (!p.transposed) {
    // The rows kernel's tasks, in any order: each writes its own bytes.
    for (int64_t t = 0; t < p.batch * p.rows_out * (p.k_out / 4); ++t) rows_task<T>(p, t);
    return;
  }
  // The transposed kernel's tasks, each reading its column of x directly
  // instead of from the shared-memory tile the device stages.
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t r = 0; r < p.rows_out; ++r)
      for (int64_t k0 = 0; k0 < p.k_out; k0 += 16) {
        int64_t valid = r < p.rows ? p.k - k0 : 0;
        valid = valid < 0 ? 0 : valid > 16 ? 16 : valid;
        const T* col = valid ? x + (b * p.k + k0) * p.rows + r : x;
        transposed_task<T>(p, b, r, k0, col, p.rows, int(valid));
      }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: residue_check IN OUT\n");
    return 2;
  }
  std::FILE* in = std::fopen(argv[1], "rb");
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", argv[1]);
    return 2;
  }
  int64_t head[8];
  if (std::fread(head, sizeof(int64_t), 8, in) != 8) return 2;
  const bool f64 = head[0] != 0, transposed = head[1] != 0;
  const int64_t batch = head[2], rows = head[3], k = head[4], rows_out = head[5], k_out = head[6], nmod = head[7];
  if (nmod < 1 || nmod > 64) {
    std::fprintf(stderr, "bad number of moduli\n");
    return 2;
  }
  std::vector<int64_t> moduli(static_cast<size_t>(nmod));
  if (std::fread(moduli.data(), sizeof(int64_t), moduli.size(), in) != moduli.size()) return 2;
  const size_t elem = f64 ? 8 : 4, count = size_t(batch * rows * k);
  std::vector<unsigned char> x(count * elem + 16);
  std::vector<int32_t> exps(size_t(batch * rows));
  if (std::fread(x.data(), elem, count, in) != count || std::fread(exps.data(), 4, exps.size(), in) != exps.size()) {
    std::fprintf(stderr, "short input\n");
    return 2;
  }
  std::fclose(in);
  ResidueProblem p;
  std::string why = setup_residues(moduli, &p);
  if (why.empty() && (rows_out < rows || k_out < k || k_out % 16)) why = "rows_out >= rows, k_out >= k, k_out % 16 == 0";
  if (!why.empty()) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 2;
  }
  const size_t total = size_t(nmod * batch * rows_out * k_out);
  const uint32_t poison = 0x5A5A5A5Au;
  std::vector<uint4> out_words((total + 15) / 16 + 1, make_uint4(poison, poison, poison, poison));  // 16-byte aligned
  p.x = x.data();
  p.exp = exps.data();
  p.out = reinterpret_cast<int8_t*>(out_words.data());
  p.batch = batch;
  p.rows = rows;
  p.k = k;
  p.rows_out = rows_out;
  p.k_out = k_out;
  p.transposed = transposed;
  p.f64 = f64;
  if (f64) run_on_host<double>(p);
  else run_on_host<float>(p);
  std::FILE* out = std::fopen(argv[2], "wb");
  if (!out || std::fwrite(p.out, 1, total, out) != total) return 2;
  std::fclose(out);
  return 0;
}
