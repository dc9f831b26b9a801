// Runs the Ozaki II reconstruction's per-element functions (ffi/int8/crt.cuh)
// on the host, for tests/test_int8_host.py:
//   crt_check [--f64] IN OUT
// IN: int64 header [nmod, batch, m, n, moduli...], then int32 products
// (nmod, batch, m, n), row exponents (batch, m), column exponents (batch, n);
// OUT: float32 (batch, m, n), or float64 with --f64 (crt_element64). Each
// element is also reconstructed from its residues (uint8, as the GEMM's
// residue epilogue writes them: CrtProblem::r), which must give the same
// bits (exit status 1 otherwise). Exit status 2 with a message on bad input.
//   crt_check --selftest
// checks the division-free reductions (crt.cuh: mod_u24 and mod_u24_direct for every x < 2^24
// and every modulus 2..256; mod_i32 with the CRT's tables and with the GEMM
// epilogue's (setup_gemm_residues) at the int32 extremes, around multiples
// of m and on a million pseudo-random values); exit status 1 on a mismatch.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "../../ffi/int8/crt.cuh"

int selftest() {
  using namespace jaxemu::int8;
  std::mt19937 rng(12345);
  for (int m = 2; m <= 256; ++m) {
    CrtProblem p;
    if (!setup_crt({m}, &p).empty()) return 2;
    GemmProblem g;
    g.batch = 1;
    if (!setup_gemm_residues({m}, &g).empty()) return 2;
    for (uint32_t x = 0; x < (1u << 24); ++x)
      if (mod_u24(x, m, p.magic[0]) != int(x % uint32_t(m)) || mod_u24_direct(x, m, p.magic[0]) != int(x % uint32_t(m))) {
        std::fprintf(stderr, "mod_u24 or mod_u24_direct(%u, %d) wrong\n", x, m);
        return 1;
      }
    std::vector<int64_t> xs = {INT32_MIN, INT32_MIN + 1, -1, 0, 1, INT32_MAX - 1, INT32_MAX};
    for (int64_t q = -(int64_t(1) << 31) / m; q <= (int64_t(1) << 31) / m; q += 997)
      for (int d = -1; d <= 1; ++d) xs.push_back(q * m + d);
    for (int i = 0; i < 1000000; ++i) xs.push_back(int32_t(rng()));
    for (int64_t x : xs) {
      if (x < INT32_MIN || x > INT32_MAX) continue;
      const int want = int(((x % m) + m) % m);
      if (residue_of(int32_t(x), p, 0) != want || mod_i32(int32_t(x), g.moduli[0]) != want) {
        std::fprintf(stderr, "mod_i32(%lld, %d) wrong\n", (long long)x, m);
        return 1;
      }
    }
  }
  std::printf("selftest ok\n");
  return 0;
}

int main(int argc, char** argv) {
  using namespace jaxemu::int8;
  if (argc == 2 && std::strcmp(argv[1], "--selftest") == 0) return selftest();
  const bool f64 = argc == 4 && std::strcmp(argv[1], "--f64") == 0;
  if (f64) ++argv, --argc;
  if (argc != 3) { std::fprintf(stderr, "usage: crt_check [--f64] IN OUT\n"); return 2; }
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
  std::vector<float> c(f64 ? 0 : total);
  std::vector<double> c64(f64 ? total : 0);
  for (int64_t i = 0; i < total; ++i) {
    if (f64) c64[i] = crt_element64(p, i, total);
    else c[i] = crt_element(p, i, total);
  }
  // The same elements from the residues.
  std::vector<uint8_t> res(prod.size());
  for (int64_t l = 0; l < nmod; ++l)
    for (int64_t i = 0; i < total; ++i) res[l * total + i] = uint8_t(residue_of(prod[l * total + i], p, int(l)));
  p.p = nullptr;
  p.r = res.data();
  for (int64_t i = 0; i < total; ++i) {
    bool same;
    if (f64) {
      const double d = crt_element64(p, i, total);
      same = std::memcmp(&c64[i], &d, 8) == 0;
    } else {
      const float f = crt_element(p, i, total);
      same = std::memcmp(&c[i], &f, 4) == 0;
    }
    if (!same) {
      std::fprintf(stderr, "element %lld: the residues give other bits than the products\n", (long long)i);
      return 1;
    }
  }
  std::FILE* out = std::fopen(argv[2], "wb");
  const size_t wrote = f64 ? std::fwrite(c64.data(), 8, c64.size(), out) : std::fwrite(c.data(), 4, c.size(), out);
  if (!out || wrote != size_t(total)) return 2;
  std::fclose(out);
  return 0;
}
