// Work decomposition of the fused GEMM: a persistent grid walks output tiles
// (and K-splits), and within a tile the K-loop walks "chunks": runs of K-tiles
// of one term between two promotions.
#pragma once

#include <cstdint>

#include "params.h"

// Host and device: tests/native/chunk_check.cu runs the schedule on the CPU.
#define JAXEMU_SCHED_FN __host__ __device__ __forceinline__

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

  JAXEMU_SCHED_FN int64_t total() const { return int64_t(tiles_m) * tiles_n * batch * splits; }

  JAXEMU_SCHED_FN WorkTile get(int64_t idx) const {
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

// The K-loop of one work item. Split `split` of `splits` takes an equal
// contiguous range of the K-tiles, [kb, ke), for every term, term after term
// (the xla backend's order of levels): the splits do equal work whatever the
// terms' promotion intervals, and each split's FP32 total sums 1/splits of
// every term. (Dividing the term-major list of whole chunks instead gave the
// split holding the long-interval terms ~10x the K-tiles of the others: the
// k-means update, 1024 x 2^20 x 256 in fp16x3, ran its GEMM in 15.4 ms on an
// H100.) Within a term, chunks are the kc_tiles[t]-aligned runs of K-tiles
// (aligned from K = 0, so that the promotion points do not depend on the
// split count) clipped to [kb, ke).
struct ChunkIter {
  const Problem* p;
  int kb, ke;             // this split's K-tiles
  int term;               // current chunk: term and K-tiles
  int kt_begin, kt_end;

  JAXEMU_SCHED_FN ChunkIter(const Problem& prob, int k_tiles, int split) : p(&prob) {
    kb = int(int64_t(k_tiles) * split / p->splits);
    ke = int(int64_t(k_tiles) * (split + 1) / p->splits);
    term = kb < ke ? 0 : p->nterms;
    kt_begin = kb;
    if (!done()) set_end();
  }

  JAXEMU_SCHED_FN bool done() const { return term >= p->nterms; }

  JAXEMU_SCHED_FN void next() {
    kt_begin = kt_end;
    if (kt_begin == ke) {
      kt_begin = kb;
      ++term;
    }
    if (!done()) set_end();
  }

 private:
  JAXEMU_SCHED_FN void set_end() {
    const int kc = p->kc_tiles[term];
    const int e = (kt_begin / kc + 1) * kc;  // end of the aligned chunk
    kt_end = e < ke ? e : ke;
  }
};

}  // namespace fused
}  // namespace jaxemu
