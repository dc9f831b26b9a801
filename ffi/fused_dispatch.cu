// Checks and dispatch of the fused GEMM by kernel configuration (slice type,
// slices per operand, tile width: ffi/fused/generate.py).
#include <algorithm>
#include <cstdint>
#include <string>

#include "fused.h"
#include "fused/inst/configs.inc"
#include "fused/f32_special.cuh"
#include "fused/split.cuh"
#include "stats/row_stats.cuh"

namespace jaxemu {
namespace fused {

#define JAXEMU_FUSED_DECLARE(name, type, slices_a, slices_b, tile_n, partials, terms0, terms1, half) \
  std::string run_##name(const Problem&, cudaStream_t, Gate);
JAXEMU_FUSED_CONFIGS(JAXEMU_FUSED_DECLARE)
#undef JAXEMU_FUSED_DECLARE

int tile_k(SliceType t) { return split_tile_k(t); }  // (split.cuh: one definition of the tile K)
int k_align(SliceType t) { return tile_k(t); }

static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// The block's largest abs_bits into p.amax_bits: a warp maximum, a
// shared-memory one, one global atomic per block (the grids are at most 16
// blocks per SM, so the atomics cost nothing next to the split).
__device__ __forceinline__ void reduce_amax(const SplitProblem& p, uint32_t m) {
  __shared__ uint32_t block_max;
  if (threadIdx.x == 0) block_max = 0;
  __syncthreads();
  m = __reduce_max_sync(0xffffffffu, m);
  if (threadIdx.x % 32 == 0) atomicMax(&block_max, m);
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned*>(p.amax_bits), block_max);
}

// The split of a (batch, rows, k) operand: one thread per 8 values of a row
// (grid-stride), split_rows_task in fused/split.cuh.
constexpr int kRowValues = 8;
__global__ void __launch_bounds__(256) split_rows_kernel(const SplitProblem p, const Gate gate) {
  const int64_t tasks = gate_closed(gate) ? 0 : p.batch * p.rows * (p.k_out / kRowValues);
  uint32_t m = 0;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < tasks; t += int64_t(gridDim.x) * blockDim.x)
    m = max(m, split_rows_task<kRowValues>(p, t));
  if (p.amax_bits) reduce_amax(p, m);
}

// The tasks of row row_id that thread `first` of the Stride threads holding
// the row takes (split_rows_exp_kernel: a lane of Lanes; split_rows_exp_
// block_kernel: a thread of the block): task i is the row's group
// i Stride + first of kRowValues values (a warp's loads: adjacent 32-byte
// pieces), loaded into v[i], zeros past k and past the row's groups (a dead
// row's, live false, too: nothing is loaded). *m takes the values' largest
// abs_bits (amax_bits); returns their largest finite_abs_bits.
template <int Stride, int Tasks>
__device__ __forceinline__ uint32_t load_row_tasks(const SplitProblem& p, int64_t row_id, bool live, int first,
                                                   float (&v)[Tasks][kRowValues], uint32_t* m) {
  const int64_t groups = p.k_out / kRowValues;
  // Every load first, then the maxima: the loads are in flight together.
#pragma unroll
  for (int i = 0; i < Tasks; ++i) {
    const int64_t g = int64_t(i) * Stride + first;
    load_row_values<kRowValues>(p, live ? row_id : 0, live && g < groups ? g * kRowValues : p.k, v[i]);  // (zeros)
  }
  uint32_t finite_max = 0;
#pragma unroll
  for (int i = 0; i < Tasks; ++i)
#pragma unroll
    for (int j = 0; j < kRowValues; ++j) {
      *m = max(*m, abs_bits(v[i][j]));
      finite_max = max(finite_max, finite_abs_bits(v[i][j]));
    }
  return finite_max;
}

// The slices of the tasks load_row_tasks gave v, scaled by 2^e: those of
// the row's groups (none past its end). v is spent: each pass writes v[0]
// and shifts the tasks after it down one. The loop stays rolled (ptxas
// leaves a loop over write_slices rolled from 2 tasks on) and every index
// into v is a constant, so v stays in registers; with v[i] in a rolled
// loop, ptxas put v in local memory (64-256 B stack frames, sm_90a, stop 58).
template <int Stride, int Tasks>
__device__ __forceinline__ void write_row_tasks(const SplitProblem& p, int64_t row_id, int first,
                                                float (&v)[Tasks][kRowValues], int e) {
  const int64_t groups = p.k_out / kRowValues;
#pragma unroll 1
  for (int i = 0; i < Tasks; ++i) {
    const int64_t g = int64_t(i) * Stride + first;
    if (g < groups) write_slices<kRowValues>(p, v[0], e, row_id, g * kRowValues);
#pragma unroll
    for (int s = 0; s + 1 < Tasks; ++s)
#pragma unroll
      for (int j = 0; j < kRowValues; ++j) v[s][j] = v[s + 1][j];
  }
}

// What the split's statistics form sums per row (SplitProblem::stats_out):
// nothing, the four extremes (max, min nonzero and sum of |x|, the
// non-finite flag), or those and the probe's four sums.
enum RowStats : int { kNoStats = 0, kExtremes = 1, kWithProbe = 2 };

// auto's row statistics (stats/params.h; stats::RowPartial, the row
// kernel's rules) of the values that load_row_tasks gave v: the thread's
// partial over its tasks i and their values j in that order, with the
// probe (kProbe) each with the probe's value at the same K (0 past k: the
// probe is read only below k, and not for a dead row). Its amax, summed
// apart (stats::Extremes), equals the float of the kernel's finite_max
// (the same maximum of the same values). Here rather than in a second
// pass: auto's data test read A once more for these
// (stats::row_stats_warp_kernel).
template <int Stride, int Tasks, bool kProbe>
__device__ __forceinline__ stats::RowPartial<kProbe> row_tasks_stats(const SplitProblem& p, int64_t row_id, bool live,
                                                                     int first, const float (&v)[Tasks][kRowValues]) {
  stats::RowPartial<kProbe> acc;
  if constexpr (kProbe) {
    const int64_t groups = p.k_out / kRowValues;
    // The probe of the row's batch entry (no division for entry 0: all rows
    // when batch is 1, as stats::reduce_row).
    const int64_t b = !live || row_id < p.rows ? 0 : row_id / p.rows;
#pragma unroll
    for (int i = 0; i < Tasks; ++i) {
      const int64_t g = int64_t(i) * Stride + first;
      float pv[kRowValues];
      load_values<kRowValues>(p.probe, p.k, b, live && g < groups ? g * kRowValues : p.k, pv);  // (zeros)
#pragma unroll
      for (int j = 0; j < kRowValues; ++j) acc.add(v[i][j], pv[j]);
    }
  } else {
    // (Padding past k and a dead row's values are zeros: they change no
    // extreme.)
#pragma unroll
    for (int i = 0; i < Tasks; ++i)
#pragma unroll
      for (int j = 0; j < kRowValues; ++j) acc.add(v[i][j], 0.f);
  }
  return acc;
}

// A butterfly over groups of Lanes lanes of a warp (xor shuffles at
// offsets Lanes / 2 .. 1): every lane of a group ends with the same merge
// of the group's partials, in the same order on every run (merge's sums
// commute: a + b and b + a are the same float). Every lane of the warp
// calls it (full-warp shuffles).
template <int Lanes, bool kProbe>
__device__ __forceinline__ void merge_lanes(stats::RowPartial<kProbe>& acc) {
#pragma unroll
  for (int o = Lanes / 2; o > 0; o /= 2) acc.merge(acc.shfl_xor(o));
}

// Row row_id's statistics into p.stats_out (the row kernel's store: its layout).
template <bool kProbe>
__device__ __forceinline__ void store_row_stats(const SplitProblem& p, int64_t row_id,
                                                const stats::RowPartial<kProbe>& acc) {
  stats::RowStatsProblem out;
  out.out = p.stats_out;
  out.batch = p.batch;
  out.rows = p.rows;
  stats::store<kProbe>(out, row_id, acc);
}

// The split of a (batch, rows, k) operand that finds fp16's row exponents
// itself (SplitProblem::exp_out) instead of taking them from an XLA pass
// over x first: Lanes lanes of a warp per row (k_out <= kSplitExpMaxK), its
// values held in registers, kRowValues per task as split_rows_kernel's,
// task i of the row's lane l being the row's group Lanes i + l
// (load_row_tasks); the row's largest finite |x| by a maximum over its
// lanes (xor shuffles within Lanes), its exponent (fp16_row_exponent, as
// xla.py's), then the tasks' slices as split_rows_task writes them. One
// read of x instead of two. Lanes and Tasks per lane (split.cuh:
// split_exp_shape): the fewest that cover k_out (8, 16 lanes for rows of up
// to 64, 128 values: no lane idles at kNN's K = 128; else 32 lanes and 1,
// 2, 4 or 8 tasks, 8 taking 117 registers per thread, sm_90a, 121 with
// the extremes, 128 with the probe's sums: still two blocks of 256 per SM,
// no stack frame; scripts/split_ptxas_audit.sh). Every lane runs the
// same number of iterations (the shuffles need the whole warp); a lane past
// the last row loads nothing and writes nothing. kStats (RowStats) other
// than kNoStats: auto's row statistics too, the extremes alone or with the
// probe's sums (SplitProblem::stats_out; row_tasks_stats), from the
// values already in registers: the data test's read of A saved; the lanes'
// partials meet in a butterfly over the row's lanes, lane 0 of a live row
// stores (a dead row's lanes take part in the shuffles: zeros, no probe).
template <int Lanes, int Tasks, int kStats>
__global__ void __launch_bounds__(256) split_rows_exp_kernel(const SplitProblem p, const Gate gate) {
  static_assert(Lanes == 8 || Lanes == 16 || Lanes == 32, "8, 16 or 32 lanes per row");
  constexpr bool kProbe = kStats == kWithProbe;
  constexpr int kRowsPerWarp = 32 / Lanes;
  const int lane = threadIdx.x % Lanes;
  const int64_t row_count = gate_closed(gate) ? 0 : p.batch * p.rows;  // (a closed gate: no rows)
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  const int64_t warp_rows = (row_count + kRowsPerWarp - 1) / kRowsPerWarp;
  uint32_t m = 0;
  for (int64_t w = warp; w < warp_rows; w += warps) {  // (uniform across the warp)
    const int64_t row_id = w * kRowsPerWarp + (threadIdx.x % 32) / Lanes;
    const bool live = row_id < row_count;
    float v[Tasks][kRowValues];
    uint32_t finite_max = load_row_tasks<Lanes, Tasks>(p, row_id, live, lane, v, &m);
#pragma unroll
    for (int o = Lanes / 2; o > 0; o /= 2) finite_max = max(finite_max, __shfl_xor_sync(0xffffffffu, finite_max, o));
    if constexpr (kStats != kNoStats) {
      stats::RowPartial<kProbe> acc = row_tasks_stats<Lanes, Tasks, kProbe>(p, row_id, live, lane, v);
      merge_lanes<Lanes>(acc);
      if (live && lane == 0) store_row_stats(p, row_id, acc);
    }
    if (!live) continue;
    const int e = fp16_row_exponent(finite_max);
    if (lane == 0) p.exp_out[row_id] = e;
    write_row_tasks<Lanes, Tasks>(p, row_id, lane, v, e);
  }
  if (p.amax_bits) reduce_amax(p, m);
}

// split_rows_exp_kernel's work for rows of kSplitExpMaxK < k_out <=
// kSplitExpBlockMaxK values, too many for a warp's registers: a block of
// kSplitExpBlockThreads threads per row (grid-stride over rows), thread t's
// task i the row's group 256 i + t (load_row_tasks: adjacent 32-byte pieces
// per warp, as the warp form's), Tasks = 2 or 4 (split.cuh:
// split_exp_shape). The row's largest finite |x|: each warp's maximum, then
// the 8 warps' through shared memory, read by every thread (so every thread
// scales by the same exponent); thread 0 writes the exponent, every thread
// its tasks' slices. kStats: each thread's partial over its tasks
// (row_tasks_stats), a butterfly within each warp, then the 8 warp
// partials merged by warp 0's lanes, lane l reading warp l % 8's, in a
// butterfly over 8 lanes (offsets 4, 2, 1: the pairwise tree ((w0 + w4) +
// (w2 + w6)) + ((w1 + w5) + (w3 + w7)), 3 roundings deep where warps 0..7
// one after another would be 7: the probe's chain is ceil(k_out / 2048) x 8
// values + 5 + 3, within cuda_stats.probe_roundings); thread 0 stores. A
// fixed order: the same bits on every run. The warps' maxima and partials
// go through shared memory in two buffers, alternate rows taking the
// other: a warp that is a row ahead writes the buffer that no thread reads
// any more (every thread has passed this row's barrier, so has read the
// buffer of the row before), one barrier per row.
template <int Tasks, int kStats>
__global__ void __launch_bounds__(kSplitExpBlockThreads) split_rows_exp_block_kernel(const SplitProblem p,
                                                                                        const Gate gate) {
  constexpr int kWarps = kSplitExpBlockThreads / 32;
  constexpr bool kProbe = kStats == kWithProbe;
  static_assert(kWarps == 8, "the warp partials' butterfly takes lanes 0..7");
  __shared__ uint32_t warp_max[2][kWarps];
  __shared__ stats::RowPartial<kProbe> warp_stats[2][kStats != kNoStats ? kWarps : 1];
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int64_t row_count = gate_closed(gate) ? 0 : p.batch * p.rows;  // (a closed gate: no rows)
  uint32_t m = 0;
  int buf = 0;
  for (int64_t row_id = blockIdx.x; row_id < row_count; row_id += gridDim.x, buf ^= 1) {  // (uniform across the block)
    float v[Tasks][kRowValues];
    uint32_t finite_max = load_row_tasks<kSplitExpBlockThreads, Tasks>(p, row_id, true, t, v, &m);
    finite_max = __reduce_max_sync(0xffffffffu, finite_max);
    if (lane == 0) warp_max[buf][warp] = finite_max;
    if constexpr (kStats != kNoStats) {
      stats::RowPartial<kProbe> acc = row_tasks_stats<kSplitExpBlockThreads, Tasks, kProbe>(p, row_id, true, t, v);
      merge_lanes<32>(acc);
      if (lane == 0) warp_stats[buf][warp] = acc;
    }
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kWarps; ++w) finite_max = max(finite_max, warp_max[buf][w]);
    if constexpr (kStats != kNoStats) {
      if (warp == 0) {
        stats::RowPartial<kProbe> acc = warp_stats[buf][lane % kWarps];
        merge_lanes<kWarps>(acc);
        if (lane == 0) store_row_stats(p, row_id, acc);
      }
    }
    const int e = fp16_row_exponent(finite_max);
    if (t == 0) p.exp_out[row_id] = e;
    write_row_tasks<kSplitExpBlockThreads, Tasks>(p, row_id, t, v, e);
  }
  if (p.amax_bits) reduce_amax(p, m);
}

// The split of a transposed (batch, k, rows) operand (B): staged through
// shared-memory tiles (ffi/common/tiles.cuh), 16 consecutive k of one row per
// thread (32- or 64-byte pieces of each slice row). Two tiles: the next
// tile's loads stay in flight while a block splits and stores this one (H200,
// 8192^3, fp16 slices: 1.06-1.10x faster than one tile, same bits; stop 42,
// docs/performance.md).
__global__ void __launch_bounds__(kTileThreads) split_transposed_kernel(const SplitProblem p, const Gate gate) {
  uint32_t m = 0;
  for_each_transposed_tile<2>(p.x, gate_closed(gate) ? 0 : p.batch, p.k, p.rows, p.k_out, p.rows,
                              [&](int64_t b, int64_t r, int64_t k0, const float* col, int64_t stride) {
                             m = max(m, split_transposed_task(p, b, r, k0, col, stride, 16));
                           });
  if (p.amax_bits) reduce_amax(p, m);
}

std::string check(const SplitProblem& p) {
  if (p.slices < 1 || p.slices > kMaxSlices) return "slices must be in 1.." + std::to_string(kMaxSlices);
  if (p.lo_scale_bits < 0 || p.lo_scale_bits > 14) return "lo_scale_bits must be in 0..14";
  if (p.batch < 0 || p.rows < 0 || p.k < 0 || p.k_out < p.k) return "the output must cover the operand (k_out >= k)";
  if (p.k_out % tile_k(p.type)) return "k_out must be a multiple of the tile's K";
  // The row statistics come from the kernel that finds the exponents (rows
  // of K = 0 too: it writes their statistics); the probe, if any, is read
  // below k.
  if (p.batch * p.rows > 0 && p.stats_out && !p.exp_out)
    return "the row statistics (stats_out) need the exponents found by the split (exp_out)";
  if (p.batch * p.rows > 0 && p.stats_probe && !p.stats_out)
    return "stats_probe asks for the row statistics, but stats_out is null";
  if (p.batch * p.rows > 0 && p.stats_out && p.stats_probe && p.k > 0 && !p.probe)
    return "the row statistics with the probe's sums (stats_probe) need a probe";
  if (p.batch * p.rows > 0 && p.probe && !(p.stats_out && p.stats_probe))
    return "a probe is only read for the row statistics with the probe's sums (stats_out, stats_probe)";
  if (p.batch * p.rows * p.k_out == 0) return "";
  if (!p.out || !aligned16(p.out)) return "the slices must be a 16-byte aligned buffer";
  if (p.k > 0 && !p.x) return "missing operand";
  if (p.exp_out && (p.transposed || p.type != SliceType::kFP16 || p.exp || p.k_out > kSplitExpBlockMaxK))
    return "finding the row exponents: fp16 slices of rows (not transposed) of K_out <= " +
           std::to_string(kSplitExpBlockMaxK) + " values, no exponents given";
  return "";
}

// split_rows_exp_kernel with the Lanes and Tasks of p's rows (split.cuh:
// split_exp_shape), or past kSplitExpMaxK split_rows_exp_block_kernel (a
// block per row), at most cap blocks.
template <int kStats>
static void launch_rows_exp(const SplitProblem& p, int64_t cap, cudaStream_t stream, Gate gate) {
  const int64_t rows = p.batch * p.rows;
  static_assert(kSplitExpMaxK == 32 * kRowValues * 8, "tasks per lane: 1, 2, 4 or 8");
  static_assert(kSplitExpBlockMaxK == kSplitExpBlockThreads * kRowValues * 4, "tasks per thread: 2 or 4");
  auto blocks = [&](int rows_per_warp) { return int(std::min((rows + 8 * rows_per_warp - 1) / (8 * rows_per_warp), cap)); };
  const SplitExpShape s = split_exp_shape(p.k_out / kRowValues);
  const int row_blocks = int(std::min(rows, cap));
  if (s.lanes == 8) split_rows_exp_kernel<8, 1, kStats><<<blocks(4), 256, 0, stream>>>(p, gate);
  else if (s.lanes == 16) split_rows_exp_kernel<16, 1, kStats><<<blocks(2), 256, 0, stream>>>(p, gate);
  else if (s.lanes == kSplitExpBlockThreads && s.tasks == 2)
    split_rows_exp_block_kernel<2, kStats><<<row_blocks, kSplitExpBlockThreads, 0, stream>>>(p, gate);
  else if (s.lanes == kSplitExpBlockThreads)
    split_rows_exp_block_kernel<4, kStats><<<row_blocks, kSplitExpBlockThreads, 0, stream>>>(p, gate);
  else if (s.tasks == 1) split_rows_exp_kernel<32, 1, kStats><<<blocks(1), 256, 0, stream>>>(p, gate);
  else if (s.tasks == 2) split_rows_exp_kernel<32, 2, kStats><<<blocks(1), 256, 0, stream>>>(p, gate);
  else if (s.tasks == 4) split_rows_exp_kernel<32, 4, kStats><<<blocks(1), 256, 0, stream>>>(p, gate);
  else split_rows_exp_kernel<32, 8, kStats><<<blocks(1), 256, 0, stream>>>(p, gate);
}

std::string run(const SplitProblem& p, cudaStream_t stream, Gate gate) {
  std::string why = check(p);
  if (!why.empty()) return why;
  // Rows without values: exponent 0, the rule's; with the statistics, the
  // kernel below writes both (it loads no value: every one is padding).
  // (Written whatever the gate says: a gated product has K > 0.)
  if (p.exp_out && !p.stats_out && p.batch * p.rows > 0 && p.k_out == 0) {
    const cudaError_t e = cudaMemsetAsync(p.exp_out, 0, size_t(p.batch * p.rows) * sizeof(int32_t), stream);
    return e == cudaSuccess ? "" : std::string("split: memset of the exponents: ") + cudaGetErrorString(e);
  }
  if (p.batch * p.rows * (p.stats_out ? 1 : p.k_out) == 0) return "";
  static int sms_cache[64] = {};
  int device = 0, sms = 132;
  if (cudaGetDevice(&device) == cudaSuccess) {
    if (device >= 0 && device < 64 && sms_cache[device]) sms = sms_cache[device];
    else if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess && sms > 0 &&
             device >= 0 && device < 64)
      sms_cache[device] = sms;
  }
  // Enough resident blocks to hide latency (fewer when a test asks).
  const int64_t cap = p.max_blocks > 0 ? p.max_blocks : int64_t(sms) * 16;
  // One row of a transposed operand, (L, K, 1), is laid out as (L, 1, K).
  if (p.exp_out) {
    if (!p.stats_out) launch_rows_exp<kNoStats>(p, cap, stream, gate);
    else if (p.stats_probe) launch_rows_exp<kWithProbe>(p, cap, stream, gate);
    else launch_rows_exp<kExtremes>(p, cap, stream, gate);
  } else if (p.transposed && p.rows != 1) {
    const int blocks = int(std::min(transposed_tiles(p.batch, p.k_out, p.rows), cap));
    split_transposed_kernel<<<blocks, kTileThreads, 0, stream>>>(p, gate);
  } else {
    const int64_t tasks = p.batch * p.rows * (p.k_out / kRowValues);
    split_rows_kernel<<<int(std::min((tasks + 255) / 256, cap)), 256, 0, stream>>>(p, gate);
  }
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("split kernel launch: ") + cudaGetErrorString(e);
}

// The kernel of a configuration, or null when none was generated: the one
// compiled for the plan's term counts if there is one (its wgmma of a K-tile
// are one group), else the one that reads the counts at run time.
using RunFn = std::string (*)(const Problem&, cudaStream_t, Gate);
static RunFn kernel_for(SliceType t, int sa, int sb, int tile_n, const TermPlan& plan, int nterms) {
  const int n0 = nterms - plan.n1, n1 = plan.n1;
#define JAXEMU_FUSED_FIXED(name, type, s_a, s_b, tn, partials, t0, t1, half)                                  \
  if (t == SliceType::type && sa == s_a && sb == s_b && tile_n == tn && t0 == n0 && t1 == n1 &&                  \
      half == (plan.sub0 == 2))                                                                                  \
    return run_##name;
  JAXEMU_FUSED_CONFIGS(JAXEMU_FUSED_FIXED)
#undef JAXEMU_FUSED_FIXED
#define JAXEMU_FUSED_ANY(name, type, s_a, s_b, tn, partials, t0, t1, half)                       \
  if (t == SliceType::type && sa == s_a && sb == s_b && tile_n == tn && t0 == 0 && plan.ngroups <= partials && \
      plan.sub0 == 1)                                                                                 \
    return run_##name;
  JAXEMU_FUSED_CONFIGS(JAXEMU_FUSED_ANY)
#undef JAXEMU_FUSED_ANY
  return nullptr;
}

// The term list of either kernel kind: slices that exist, weights in range, intervals >= 1.
static std::string check_terms(const Problem& p) {
  if (p.nterms < 1 || p.nterms > kMaxTerms) return "nterms must be in 1.." + std::to_string(kMaxTerms);
  for (int i = 0; i < p.nterms; ++i) {
    if (p.term_a[i] < 0 || p.term_a[i] >= p.sa || p.term_b[i] < 0 || p.term_b[i] >= p.sb)
      return "term " + std::to_string(i) + " names a slice that does not exist";
    if (p.term_exp[i] < -126 || p.term_exp[i] > 127) return "term weight exponent out of range";
    if (p.kc_tiles[i] < 1) return "promotion interval must be >= 1 tile";
  }
  return "";
}

static const char* type_name(SliceType t) {
  return t == SliceType::kBF16 ? "bf16" : t == SliceType::kFP16 ? "fp16" : "tf32";
}

std::string check(SliceType t, const Problem& p) {
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.batch < 1) return "empty problem (the caller handles zero-sized dims)";
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX) return "dimension too large for TMA coordinates";
  if (p.sa < 1 || p.sb < 1 || p.sa * p.batch > INT32_MAX || p.sb * p.batch > INT32_MAX) return "bad slice counts";
  if (p.k % k_align(t)) return "K = " + std::to_string(p.k) + " is not a multiple of " + std::to_string(k_align(t));
  int64_t k_tiles = (p.k + tile_k(t) - 1) / tile_k(t);
  std::string bad = check_terms(p);
  if (!bad.empty()) return bad;
  TermPlan plan;
  std::string why = plan_terms(p, &plan);
  if (!why.empty()) return why;
  if (!kernel_for(t, p.sa, p.sb, p.tile_n, plan, p.nterms))
    return std::string("no kernel for ") + type_name(t) + " with " + std::to_string(p.sa) + " x " +
           std::to_string(p.sb) + " slices, " +
           std::to_string(plan.ngroups) + " term weights and tile_n " + std::to_string(p.tile_n) +
           (plan.sub0 == 2 ? ", promoting every half K-tile" : "") +
           " (ffi/fused/generate.py lists the configurations)";
  if (p.splits < 1 || p.splits > k_tiles) return "splits must be in 1..(number of K-tiles)";
  if (!aligned16(p.a) || !aligned16(p.b) || !aligned16(p.c)) return "operand pointers must be 16-byte aligned";
  if ((p.row_exp == nullptr) != (p.col_exp == nullptr)) return "row and column exponents come together";
  return "";
}

std::string run(SliceType t, const Problem& p, cudaStream_t stream, Gate gate) {
  std::string why = check(t, p);
  if (!why.empty()) return why;
  TermPlan plan;
  plan_terms(p, &plan);
  return kernel_for(t, p.sa, p.sb, p.tile_n, plan, p.nterms)(p, stream, gate);
}

// C = the K-splits' partials summed in split order (the order the slice path
// adds them in XLA, jaxemu/backends/cuda_fused.py), and flags[0] raised where
// a sum is not finite.
__global__ void __launch_bounds__(256) reduce_splits_kernel(const float* __restrict__ partials, float* __restrict__ c,
                                                            int64_t count, int splits, int32_t* flags) {
  bool bad = false;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    float s = partials[i];
    for (int sp = 1; sp < splits; ++sp) s += partials[int64_t(sp) * count + i];
    c[i] = s;
    bad |= not_finite(s);
  }
  raise_if(bad, flags);
}

// FP32's special values in C after the GEMM. Where the GEMM may hold values
// that are not finite (flags[0] raised by the FP32-operand kernels; or, with
// flags null, max |A| and max |B| (amax, two floats) failing the fits test
// below), every entry of C that is not finite becomes the FP32 dot product
// of its row of A and column of B (FP32's NaN/Inf pattern, which the
// emulation reproduces as "not finite" but not always as the same one: Inf
// * a slice rounded to 0 is NaN; and FP32's own value where the emulation
// overflowed). A (L, M, K); B (L, K, N), or with b_rows B^T (L, N, K). Rare,
// so simple: one thread per entry of C; otherwise it returns at once, as it
// does where its gate (its product's: common/gate.h) is closed.
// The fits test is jaxemu/backends/xla.py's product_fits: max|A| max|B| K <
// 2^100 in float32 arithmetic (NaN, Inf and Inf * 0 fail it): then no slice,
// partial sum or value of C can overflow, and the operands are finite.
__global__ void __launch_bounds__(256) fixup_special_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                                            float* __restrict__ c, int64_t m, int64_t n, int64_t k,
                                                            int64_t batch, bool b_rows, const int32_t* flags,
                                                            const float* amax, const Gate gate) {
  if (gate_closed(gate)) return;
  if (flags != nullptr) {
    if (*reinterpret_cast<const volatile int32_t*>(flags) == 0) return;
  } else if ((amax[0] * amax[1]) * float(k) < 0x1p100f) {
    return;
  }
  const int64_t count = batch * m * n;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    if (!not_finite(c[i])) continue;
    const int64_t l = i / (m * n), row = (i / n) % m, col = i % n;
    const float* ar = a + (l * m + row) * k;
    const float* bc = b_rows ? b + (l * n + col) * k : b + l * k * n + col;
    const int64_t step = b_rows ? 1 : n;
    float s = 0.f;
    for (int64_t q = 0; q < k; ++q) s = fmaf(ar[q], bc[q * step], s);
    c[i] = s;
  }
}

static int fixup_blocks(int64_t count, int sms) { return int(std::min<int64_t>((count + 255) / 256, int64_t(sms) * 8)); }

std::string fixup_special(const Problem& p, const float* a, const float* b, int64_t k, bool b_rows,
                          const float* amax, cudaStream_t stream, Gate gate) {
  if (p.splits != 1) return "the fix-up reads C: a launch without K-splits";
  int device = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return std::string("cannot query the device: ") + cudaGetErrorString(e);
  fixup_special_kernel<<<fixup_blocks(p.batch * p.m * p.n, sms), 256, 0, stream>>>(a, b, p.c, p.m, p.n, k, p.batch,
                                                                                  b_rows, nullptr, amax, gate);
  e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("fix-up launch: ") + cudaGetErrorString(e);
}

std::string finish_f32(const Problem& p, const SplitF32& f32, int sms, cudaStream_t stream) {
  const int64_t count = p.batch * p.m * p.n;
  const int blocks = fixup_blocks(count, sms);
  if (p.splits > 1) reduce_splits_kernel<<<blocks, 256, 0, stream>>>(f32.partials, p.c, count, p.splits, f32.flags);
  // With fp16's exponents found in the kernel (item_exp), an entry that is
  // not finite may be a value past the headroom, which the pass's exponents
  // would have held: the raised flag goes back to the caller, which redoes
  // the product with them (jaxemu/backends/cuda_fused.py: f32_product)
  // rather than give FP32's value here, one thread per entry.
  if (p.item_exp == nullptr)
    fixup_special_kernel<<<blocks, 256, 0, stream>>>(static_cast<const float*>(p.a), static_cast<const float*>(p.b),
                                                     p.c, p.m, p.n, p.k, p.batch, false, f32.flags, nullptr, Gate{});
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("split-K sum / fix-up launch: ") + cudaGetErrorString(e);
}

#define JAXEMU_F32_DECLARE(name, type, slices_a, slices_b, terms, register_a, exps_in_kernel) \
  std::string run_##name(const Problem&, const SplitProblem&, const SplitF32&, cudaStream_t);
JAXEMU_F32_CONFIGS(JAXEMU_F32_DECLARE)
#undef JAXEMU_F32_DECLARE

using RunF32Fn = std::string (*)(const Problem&, const SplitProblem&, const SplitF32&, cudaStream_t);
static RunF32Fn f32_kernel_for(SliceType t, int sa, int sb, int nterms, bool register_a, bool exps_in_kernel) {
#define JAXEMU_F32_PICK(name, type, s_a, s_b, terms, reg_a, ek)                                                 \
  if (t == SliceType::type && sa == s_a && sb == s_b && nterms == terms && register_a == bool(reg_a) && \
      exps_in_kernel == bool(ek))                                                                          \
    return run_##name;
  JAXEMU_F32_CONFIGS(JAXEMU_F32_PICK)
#undef JAXEMU_F32_PICK
  return nullptr;
}

std::string check_f32(const Problem& p, const SplitProblem& cut, const SplitF32& f32) {
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.batch < 1) return "empty problem (the caller handles zero-sized dims)";
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX || p.batch > INT32_MAX)
    return "dimension too large for TMA coordinates";
  if (p.k % 4 || p.n % 4) return "K and N must be multiples of 4 (TMA's 16-byte row strides of A and B)";
  if (cut.truncate) return "slices rounded to nearest only";
  const bool scaled = cut.type == SliceType::kFP16;  // fp16's row scaling: both operands' exponents
  if (p.item_exp != nullptr) {  // or found in the kernel (params.h)
    if (!scaled || p.row_exp != nullptr || p.col_exp != nullptr)
      return "exponents found in the kernel: fp16 slices, and no row or column exponents given";
    if (p.exp_headroom < 0 || p.exp_headroom > 8) return "exp_headroom must be in 0..8";
  } else if (scaled != (p.row_exp != nullptr) || scaled != (p.col_exp != nullptr)) {
    return scaled ? "fp16 slices need both operands' row exponents"
                  : std::string(type_name(cut.type)) + " slices are not scaled";
  }
  if (cut.lo_scale_bits < 0 || cut.lo_scale_bits > 14) return "lo_scale_bits must be in 0..14";
  // Unscaled slices: one term weight (below), which lo slices scaled by 2^b
  // would break (their products weigh 2^-b, the kernel adds them as 2^0).
  if (!scaled && cut.lo_scale_bits != 0)
    return std::string(type_name(cut.type)) + " slices take lo_scale_bits = 0 on the FP32-operand kernels";
  std::string bad = check_terms(p);
  if (!bad.empty()) return bad;
  TermPlan plan;
  std::string why = plan_terms(p, &plan);
  if (!why.empty()) return why;
  if (plan.ngroups != (scaled ? 2 : 1))
    return scaled ? "the fp16 FP32-operand kernels take terms of two weights"
                  : std::string("the ") + type_name(cut.type) + " FP32-operand kernels take terms of one weight";
  if (!f32_kernel_for(cut.type, p.sa, p.sb, p.nterms, f32.register_a, p.item_exp != nullptr))
    return std::string("no FP32-operand kernel for ") + type_name(cut.type) + ", " + std::to_string(p.sa) + " x " +
           std::to_string(p.sb) + " slices and " + std::to_string(p.nterms) + " terms" +
           (f32.register_a ? " with A in registers" : "") +
           (p.item_exp != nullptr ? " finding its exponents (dense fp16x3 only)" : "") +
           " (ffi/fused/generate.py: F32_CONFIGS)";
  const int64_t k_tiles = (p.k + kF32TileK - 1) / kF32TileK;
  if (p.splits < 1 || p.splits > k_tiles) return "splits must be in 1..(number of K-tiles)";
  if (!aligned16(p.a) || !aligned16(p.b) || !aligned16(p.c)) return "operand pointers must be 16-byte aligned";
  if (f32.flags == nullptr) return "missing the special-value flag";
  if (p.splits > 1 && (f32.partials == nullptr || !aligned16(f32.partials))) return "K-splits need a 16-byte aligned partials buffer";
  return "";
}

std::string run_f32(const Problem& p, const SplitProblem& cut, const SplitF32& f32, cudaStream_t stream) {
  std::string why = check_f32(p, cut, f32);
  if (!why.empty()) return why;
  return f32_kernel_for(cut.type, p.sa, p.sb, p.nterms, f32.register_a, p.item_exp != nullptr)(p, cut, f32, stream);
}

}  // namespace fused

bool device_supported(int device, std::string* why) {
  int major = 0, minor = 0;
  cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cannot query the device: ") + cudaGetErrorString(e);
    return false;
  }
  if (major != 9) {
    if (why) *why = "the kernels are built for sm_90 (Hopper); this device is sm_" + std::to_string(major * 10 + minor);
    return false;
  }
  return true;
}

}  // namespace jaxemu
