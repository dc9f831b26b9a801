// The fused GEMM's K-loop schedule (ffi/fused/scheduler.cuh: KChunks, with
// the term plan of ffi/fused/params.h) on the host: for a term table and a
// split count, prints every chunk as
//   split kt_begin kt_end promotes_group1
// one per line, after a first line "plan NGROUPS N1 KC0 KC1" (or "refused
// WHY") (tests/test_fused_layout.py checks coverage, balance, promotion points).
//   chunk_check K_TILES SPLITS [sub=KC_SUB] EXP_0:KC_0 [EXP_1:KC_1 ...]   (terms in kernel order)
// (the plan line then ends with group 0's promotions per K-tile, SUB0)
// and the persistent grid's work items (scheduler.cuh: TileScheduler) as
//   m_blk n_blk l split
// one per work item in index order:
//   chunk_check sched TILES_M TILES_N BATCH SPLITS
// and, per divisor D, how many dividends FastDiv gets wrong (of the first
// and last 2^17 below 2^31 and the 2^17 multiples of D nearest 2^31, +- 1):
//   chunk_check div D [D ...]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "../../ffi/fused/scheduler.cuh"

static int schedule(int argc, char** argv) {
  if (argc != 6) return 2;
  const auto s = jaxemu::fused::TileScheduler::make(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]),
                                                    std::atoi(argv[5]));
  if (!s.fits()) {
    std::printf("refused\n");
    return 0;
  }
  for (int64_t i = 0; i < s.total(); ++i) {
    const jaxemu::fused::WorkTile w = s.get(i);
    std::printf("%d %d %d %d\n", w.m_blk, w.n_blk, w.l, w.split);
  }
  return 0;
}

static int divisions(int argc, char** argv) {
  for (int a = 2; a < argc; ++a) {
    const uint32_t d = uint32_t(std::strtoul(argv[a], nullptr, 10));
    const jaxemu::fused::FastDiv f(d);
    const uint32_t top = 0x7fffffffu;
    int64_t bad = 0;
    auto check = [&](uint32_t n) { bad += n <= top && f.div(n) != n / d; };
    for (uint32_t n = 0; n < (1u << 17); ++n) {
      check(n);
      check(top - n);
    }
    for (uint32_t q = top / d, i = 0; i < (1u << 17) && i <= q; ++i) {
      const uint32_t n = (q - i) * d;
      check(n);
      check(n + 1);
      if (n > 0) check(n - 1);
    }
    std::printf("%u %lld\n", d, static_cast<long long>(bad));
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "sched") return schedule(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "div") return divisions(argc, argv);
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s K_TILES SPLITS EXP_0:KC_0 [EXP_1:KC_1 ...]\n", argv[0]);
    return 2;
  }
  jaxemu::fused::Problem p;
  const int k_tiles = std::atoi(argv[1]);
  p.splits = std::atoi(argv[2]);
  int first = 3;
  if (std::sscanf(argv[3], "sub=%d", &p.kc_sub) == 1) ++first;
  p.nterms = argc - first;
  if (p.nterms < 1 || p.nterms > jaxemu::fused::kMaxTerms) return 2;
  for (int t = 0; t < p.nterms; ++t) {
    if (std::sscanf(argv[first + t], "%d:%d", &p.term_exp[t], &p.kc_tiles[t]) != 2) return 2;
  }
  jaxemu::fused::TermPlan plan;
  const std::string why = jaxemu::fused::plan_terms(p, &plan);
  if (!why.empty()) {
    std::printf("refused %s\n", why.c_str());
    return 0;
  }
  std::printf("plan %d %d %d %d %d\n", plan.ngroups, plan.n1, plan.kc_tiles[0], plan.kc_tiles[1], plan.sub0);
  for (int s = 0; s < p.splits; ++s)
    for (jaxemu::fused::KChunks it(plan, k_tiles, s, p.splits); !it.done(); it.next())
      std::printf("%d %d %d %d\n", s, it.kt_begin, it.kt_end, int(it.promotes_group1()));
  return 0;
}
