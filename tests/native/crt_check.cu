// Runs the Ozaki II reconstruction's per-element function (ffi/int8/crt.cuh)
// on the host, for tests/test_int8_host.py:
//   crt_check IN OUT
// IN: int64 header [nmod, batch, m, n, moduli...], then int32 products
// (nmod, batch, m, n), row exponents (batch, m), column exponents (batch, n);
// OUT: float32 (batch, m, n). Exit status 2 with a message on bad input.
#include <cstdio>
#include <vector>

#include "../../ffi/int8/crt.cuh"

int main(int argc, char** argv) {
  using namespace jaxemu::int8;
  if (argc != 3) { std::fprintf(stderr, "usage: crt_check IN OUT\n"); return 2; }
  std::FILE* in = std::fopen(argv[1], "rb");
  if (!in) { std::fprintf(stderr, "cannot open %s\n", argv[1]); return 2; }
  int64_t head[4];
  if (std::fread(head, sizeof(int64_t), 4, in) != 4) return 2;
  const int64_t nmod = head[0], batch = head[1], m = head[2], n = head[3];
  std::vector<int64_t> moduli(nmod);
  if (std::fread(moduli.data(), sizeof(int64_t), nmod, in) != size_t(nmod)) return 2;
  const int64_t total = batch * m * n;
  std::vector<int32_t> prod(nmod * total), row(batch * m), col(batch * n);
  if (std::fread(prod.data(), 4, prod.size(), in) != prod.size() || std::fread(row.data(), 4, row.size(), in) != row.size() ||
      std::fread(col.data(), 4, col.size(), in) != col.size()) {
    std::fprintf(stderr, "short input\n");
    return 2;
  }
  std::fclose(in);
  CrtProblem p;
  std::string why = setup_crt(moduli, &p);
  if (!why.empty()) { std::fprintf(stderr, "%s\n", why.c_str()); return 2; }
  p.p = prod.data();
  p.row_exp = row.data();
  p.col_exp = col.data();
  p.batch = batch;
  p.m = m;
  p.n = n;
  std::vector<float> c(total);
  for (int64_t i = 0; i < total; ++i) c[i] = crt_element(p, i, total);
  std::FILE* out = std::fopen(argv[2], "wb");
  if (!out || std::fwrite(c.data(), 4, c.size(), out) != c.size()) return 2;
  std::fclose(out);
  return 0;
}
