// Work decomposition of the fused GEMM: a persistent grid walks output tiles
// (and K-splits), and within a tile the K-loop walks "chunks": runs of K-tiles
// of one term between two promotions.
#pragma once

#include <cstdint>

#include "cutlass/cutlass.h"

#include "params.h"

namespace jaxemu {
namespace fused {

struct WorkTile {
  int m_blk, n_blk, l, split;
};

// Static persistent schedule: CTA b takes work items b, b + grid, b + 2 grid, ...
// Items run split-major, then batch, then tiles in groups of kGroupM tile rows,
// column by column inside a group, so that the CTAs running at the same time
// share A rows and B columns in L2.
struct TileScheduler {
  static constexpr int kGroupM = 8;
  int tiles_m, tiles_n, batch, splits;

  CUTLASS_HOST_DEVICE int64_t total() const { return int64_t(tiles_m) * tiles_n * batch * splits; }

  CUTLASS_DEVICE WorkTile get(int64_t idx) const {
    const int64_t per_batch = int64_t(tiles_m) * tiles_n;
    WorkTile w;
    int64_t outer = idx / per_batch;
    int64_t t = idx - outer * per_batch;
    w.l = int(outer % batch);
    w.split = int(outer / batch);
    const int64_t per_group = int64_t(kGroupM) * tiles_n;
    int64_t group = t / per_group;
    int first_m = int(group * kGroupM);
    int rows = tiles_m - first_m < kGroupM ? tiles_m - first_m : kGroupM;
    int64_t in_group = t - group * per_group;
    w.m_blk = first_m + int(in_group % rows);
    w.n_blk = int(in_group / rows);
    return w;
  }
};

// The K-loop of one work item. Term t's K-tiles are cut into chunks of
// kc_tiles[t]; the chunks of all terms, in term order, are numbered 0..total-1
// and split `split` of `splits` takes a contiguous range of them.
struct ChunkIter {
  const Problem* p;
  int k_tiles;
  int term, local;        // current chunk: term and index within the term
  int remaining;          // chunks left in this work item
  int kt_begin, kt_end;   // K-tiles of the current chunk

  CUTLASS_DEVICE int chunks_of(int t) const { return (k_tiles + p->kc_tiles[t] - 1) / p->kc_tiles[t]; }

  CUTLASS_DEVICE ChunkIter(const Problem& prob, int k_tiles_, int split) : p(&prob), k_tiles(k_tiles_) {
    int total = 0;
    for (int t = 0; t < p->nterms; ++t) total += chunks_of(t);
    int begin = int(int64_t(total) * split / p->splits);
    int end = int(int64_t(total) * (split + 1) / p->splits);
    remaining = end - begin;
    term = 0;
    local = begin;
    while (term < p->nterms && local >= chunks_of(term)) {
      local -= chunks_of(term);
      ++term;
    }
    set_range();
  }

  CUTLASS_DEVICE bool done() const { return remaining <= 0; }

  CUTLASS_DEVICE void next() {
    --remaining;
    if (++local == chunks_of(term)) {
      local = 0;
      ++term;
    }
    if (!done()) set_range();
  }

 private:
  CUTLASS_DEVICE void set_range() {
    if (term >= p->nterms) return;
    kt_begin = local * p->kc_tiles[term];
    kt_end = kt_begin + p->kc_tiles[term] < k_tiles ? kt_begin + p->kc_tiles[term] : k_tiles;
  }
};

}  // namespace fused
}  // namespace jaxemu
