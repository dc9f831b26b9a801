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

// n / d for 0 <= n < 2^31 by one multiply and shift, the divisor's
// multiplier made once on the host (Granlund and Montgomery, "Division by
// invariant integers using multiplication", PLDI 1994): with l = ceil(log2
// d), p = 31 + l and m = ceil(2^p / d) < 2^32, m d = 2^p + e with 0 <= e < d
// <= 2^l, so n m / 2^p = n / d + n e / (d 2^p) and n e < 2^31 2^l = 2^p
// keeps the excess below 1 / d: the floor is n / d's. (The consumers work
// out each work item's coordinates between one tile's epilogue and the next
// tile's first wgmma, with the tensor cores idle: six 64-bit divisions there
// were a visible part of a short-K tile in ncu's samples, docs/performance.md
// stop 31.)
struct FastDiv {
  uint32_t d = 1, m = 0x80000000u;
  int p = 31;
  FastDiv() = default;
  JAXEMU_SCHED_FN explicit FastDiv(uint32_t divisor) : d(divisor) {
    int l = 0;
    while ((uint64_t(1) << l) < d) ++l;
    p = 31 + l;
    m = uint32_t(((uint64_t(1) << p) + d - 1) / d);
  }
  JAXEMU_SCHED_FN uint32_t div(uint32_t n) const { return uint32_t((uint64_t(n) * m) >> p); }
};

// Static persistent schedule: CTA b takes work items b, b + grid, b + 2 grid, ...
// Items run split-major, then batch, then tiles in groups of kGroupM tile rows,
// column by column inside a group, so that the CTAs running at the same time
// share A rows and B columns in L2. Built on the host (make): at most
// kMaxItems work items, so that every index is a 32-bit FastDiv dividend.
struct TileScheduler {
  static constexpr int kGroupM = 8;
  static constexpr int64_t kMaxItems = int64_t(1) << 31;
  int tiles_m = 0, tiles_n = 0, batch = 1, splits = 1;
  FastDiv per_batch, batches, per_group, last_rows;  // tiles_m tiles_n, batch, kGroupM tiles_n, the last group's rows

  // The schedule of a grid of work items (fits(): few enough for 32-bit
  // indices; the host refuses a launch otherwise).
  static JAXEMU_SCHED_FN TileScheduler make(int tiles_m, int tiles_n, int batch, int splits) {
    TileScheduler s;
    s.tiles_m = tiles_m;
    s.tiles_n = tiles_n;
    s.batch = batch;
    s.splits = splits;
    if (s.total() >= kMaxItems || s.total() == 0) return s;
    s.per_batch = FastDiv(uint32_t(tiles_m) * uint32_t(tiles_n));
    s.batches = FastDiv(uint32_t(batch));
    s.per_group = FastDiv(uint32_t(kGroupM) * uint32_t(tiles_n));
    const int last = tiles_m % kGroupM;
    s.last_rows = FastDiv(uint32_t(last == 0 ? kGroupM : last));
    return s;
  }

  JAXEMU_SCHED_FN int64_t total() const { return int64_t(tiles_m) * tiles_n * batch * splits; }
  JAXEMU_SCHED_FN bool fits() const { return total() < kMaxItems; }

  // Work item idx (0 <= idx < total() < 2^31).
  JAXEMU_SCHED_FN WorkTile get(int64_t idx64) const {
    const uint32_t idx = uint32_t(idx64);
    WorkTile w;
    const uint32_t outer = per_batch.div(idx);
    const uint32_t t = idx - outer * per_batch.d;
    const uint32_t split = batches.div(outer);
    w.split = int(split);
    w.l = int(outer - split * batches.d);
    const uint32_t group = per_group.div(t);
    const uint32_t first_m = group * kGroupM;
    const uint32_t in_group = t - group * per_group.d;
    // Every group holds kGroupM tile rows (a shift) but the last, which may hold fewer.
    uint32_t n_blk, rows;
    if (first_m + kGroupM <= uint32_t(tiles_m)) {
      n_blk = in_group / kGroupM;
      rows = kGroupM;
    } else {
      n_blk = last_rows.div(in_group);
      rows = last_rows.d;
    }
    w.n_blk = int(n_blk);
    w.m_blk = int(first_m + (in_group - n_blk * rows));
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
  int next1;               // the first multiple of kc1 after kt_begin

  // (Divisions only here, once per work item and none with one split: the
  // chunks after the first start on a multiple of kc0, and the chunk ends
  // that are group 1's promotion points are tracked, not tested with %.)
  JAXEMU_SCHED_FN KChunks(const TermPlan& plan, int k_tiles, int split, int splits)
      : kc0(plan.kc_tiles[0]), kc1(plan.kc_tiles[1]) {
    if (splits == 1) {
      kb = 0;
      ke = k_tiles;
    } else {
      kb = int(int64_t(k_tiles) * split / splits);
      ke = int(int64_t(k_tiles) * (split + 1) / splits);
    }
    kt_begin = kb;
    const int e = kb == 0 ? kc0 : (kb / kc0 + 1) * kc0;  // end of the aligned chunk holding kb
    kt_end = e < ke ? e : ke;
    next1 = kb == 0 ? kc1 : (kb / kc1 + 1) * kc1;
  }

  JAXEMU_SCHED_FN bool done() const { return kt_begin >= ke; }

  JAXEMU_SCHED_FN void next() {
    // kt_end <= next1 (both multiples of kc0 past kt_begin, or kt_end = ke):
    // past kt_end, the next multiple of kc1 is next1 or the one after it.
    if (kt_end == next1) next1 += kc1;
    kt_begin = kt_end;
    const int e = kt_begin + kc0;  // kt_begin is a multiple of kc0 (or ke: done)
    kt_end = e < ke ? e : ke;
  }

  // Whether group 1 promotes after this chunk: at the end of the range and
  // at the multiples of kc1 (the only one a chunk can end on is next1).
  JAXEMU_SCHED_FN bool promotes_group1() const { return kt_end == ke || kt_end == next1; }
};

}  // namespace fused
}  // namespace jaxemu
