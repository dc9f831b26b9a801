// The fused GEMM's K-loop schedule (ffi/fused/scheduler.cuh: KChunks, with
// the term plan of ffi/fused/params.h) on the host: for a term table and a
// split count, prints every chunk as
//   split kt_begin kt_end promotes_group1
// one per line, after a first line "plan NGROUPS N1 KC0 KC1" (or "refused
// WHY") (tests/test_fused_layout.py checks coverage, balance, promotion points).
//   chunk_check K_TILES SPLITS EXP_0:KC_0 [EXP_1:KC_1 ...]   (terms in kernel order)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "../../ffi/fused/scheduler.cuh"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s K_TILES SPLITS EXP_0:KC_0 [EXP_1:KC_1 ...]\n", argv[0]);
    return 2;
  }
  jaxemu::fused::Problem p;
  const int k_tiles = std::atoi(argv[1]);
  p.splits = std::atoi(argv[2]);
  p.nterms = argc - 3;
  if (p.nterms > jaxemu::fused::kMaxTerms) return 2;
  for (int t = 0; t < p.nterms; ++t) {
    if (std::sscanf(argv[3 + t], "%d:%d", &p.term_exp[t], &p.kc_tiles[t]) != 2) return 2;
  }
  jaxemu::fused::TermPlan plan;
  const std::string why = jaxemu::fused::plan_terms(p, &plan);
  if (!why.empty()) {
    std::printf("refused %s\n", why.c_str());
    return 0;
  }
  std::printf("plan %d %d %d %d\n", plan.ngroups, plan.n1, plan.kc_tiles[0], plan.kc_tiles[1]);
  for (int s = 0; s < p.splits; ++s)
    for (jaxemu::fused::KChunks it(plan, k_tiles, s, p.splits); !it.done(); it.next())
      std::printf("%d %d %d %d\n", s, it.kt_begin, it.kt_end, int(it.promotes_group1()));
  return 0;
}
