// The fused GEMM's K-loop schedule (ffi/fused/scheduler.cuh: ChunkIter) on
// the host: for a term table and a split count, prints every chunk as
//   split term kt_begin kt_end
// one per line (tests/test_fused_layout.py checks coverage and balance).
//   chunk_check K_TILES SPLITS KC_0 [KC_1 ...]
#include <cstdio>
#include <cstdlib>

#include "../../ffi/fused/scheduler.cuh"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s K_TILES SPLITS KC_0 [KC_1 ...]\n", argv[0]);
    return 2;
  }
  jaxemu::fused::Problem p;
  const int k_tiles = std::atoi(argv[1]);
  p.splits = std::atoi(argv[2]);
  p.nterms = argc - 3;
  if (p.nterms > jaxemu::fused::kMaxTerms) return 2;
  for (int t = 0; t < p.nterms; ++t) p.kc_tiles[t] = std::atoi(argv[3 + t]);
  for (int s = 0; s < p.splits; ++s)
    for (jaxemu::fused::ChunkIter it(p, k_tiles, s); !it.done(); it.next())
      std::printf("%d %d %d %d\n", s, it.term, it.kt_begin, it.kt_end);
  return 0;
}
