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

// The K-loop of one work item. The K-tiles of all terms, term after term, form
// one sequence of nterms * k_tiles steps, and split `split` of `splits` takes
// an equal contiguous share of it (within one step): the splits do equal work
// whatever the terms' promotion intervals. (Dividing whole chunks instead gave
// the split holding the long-interval terms up to 10x the K-tiles of the
// others: the k-means update, 1024 x 2^20 x 256, ran 15.4 ms instead of ~5 on
// an H100.) Within a term, chunks are the kc_tiles[t]-aligned runs of K-tiles;
// a chunk that a split boundary cuts is promoted in two parts (an extra
// round-to-nearest add, never a longer run in the tensor cores).
struct ChunkIter {
  const Problem* p;
  int k_tiles;
  int64_t pos, end;       // position in the term-major K-tile sequence, end of this split's share
  int term;               // current chunk: term and K-tiles
  int kt_begin, kt_end;

  JAXEMU_SCHED_FN ChunkIter(const Problem& prob, int k_tiles_, int split) : p(&prob), k_tiles(k_tiles_) {
    const int64_t total = int64_t(p->nterms) * k_tiles;
    pos = total * split / p->splits;
    end = total * (split + 1) / p->splits;
    if (!done()) set_range();
  }

  JAXEMU_SCHED_FN bool done() const { return pos >= end; }

  JAXEMU_SCHED_FN void next() {
    pos += kt_end - kt_begin;
    if (!done()) set_range();
  }

 private:
  JAXEMU_SCHED_FN void set_range() {
    term = int(pos / k_tiles);
    kt_begin = int(pos - int64_t(term) * k_tiles);
    const int kc = p->kc_tiles[term];
    int e = (kt_begin / kc + 1) * kc;  // end of the aligned chunk
    if (e > k_tiles) e = k_tiles;
    if (int64_t(e - kt_begin) > end - pos) e = kt_begin + int(end - pos);
    kt_end = e;
  }
};

}  // namespace fused
}  // namespace jaxemu
