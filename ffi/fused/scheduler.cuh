// Work decomposition of the fused GEMM: a persistent grid walks output tiles
// (and K-splits), and within a tile the K-loop walks "chunks": runs of K-tiles
// between two promotions.
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
// contiguous range of the K-tiles, [kb, ke) (equal work; its FP32 total sums
// 1/splits of every term). The range is walked in chunks: the runs of
// group 0's interval (TermPlan::kc_tiles[0]) aligned from K = 0, so that the
// promotion points do not depend on the split count, clipped to [kb, ke).
// Every chunk ends with group 0's promotion; group 1 (when there is one)
// promotes at the chunks that end on a multiple of its own interval, and at
// the end of the range. (Dividing the K-tiles, not whole chunks of a
// term-major list, among the splits: the latter gave one split ~10x the
// work of the others, docs/performance.md.)
struct KChunks {
  int kb, ke;              // this split's K-tiles
  int kc0, kc1;            // the groups' promotion intervals, in K-tiles
  int kt_begin, kt_end;    // current chunk

  JAXEMU_SCHED_FN KChunks(const TermPlan& plan, int k_tiles, int split, int splits)
      : kc0(plan.kc_tiles[0]), kc1(plan.kc_tiles[1]) {
    kb = int(int64_t(k_tiles) * split / splits);
    ke = int(int64_t(k_tiles) * (split + 1) / splits);
    kt_begin = kb;
    if (!done()) set_end();
  }

  JAXEMU_SCHED_FN bool done() const { return kt_begin >= ke; }

  JAXEMU_SCHED_FN void next() {
    kt_begin = kt_end;
    if (!done()) set_end();
  }

  // Whether group 1 promotes after this chunk.
  JAXEMU_SCHED_FN bool promotes_group1() const { return kt_end == ke || kt_end % kc1 == 0; }

 private:
  JAXEMU_SCHED_FN void set_end() {
    const int e = (kt_begin / kc0 + 1) * kc0;  // end of the aligned chunk
    kt_end = e < ke ? e : ke;
  }
};

}  // namespace fused
}  // namespace jaxemu
