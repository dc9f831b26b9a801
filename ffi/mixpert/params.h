// jaxemu MixPert kernel: the problem shared by host and device.
//
// MixPert (LCTES 2024) levels on the int8 tensor cores, one launch per
// emulated product. Each row of A and each column of B is cut into K-tiles
// of 32 values; a tile shares one exponent, and its values, aligned to it,
// are cut into int8 slices (jaxemu/backends/xla.py: split_int8). Per K-tile
// the slice products of each level (products (i, j) with equal i + j have
// equal weight) accumulate exactly in one int32 accumulator per level; the
// levels are combined, converted to FP32 and scaled by the tile pair's
// factor 2^(e_A + e_B - c) once per K-tile: C = sum over K-tiles t of
// scale_a[t, m] scale_b[t, n] sum_L 2^(7 (NL - 1 - L)) P_L[t, m, n].
//   a:       (L, M, K / TK, SA, TK) int8, TK = 128 (four K-tiles of 32):
//            for each row and 128 K-steps the SA slices side by side
//   b:       (L, N, K / TK, SB, TK) int8 (B stored transposed), likewise
//   scale_a: (L, K / 32, Mp) float32, Mp = M rounded up to a multiple of 4
//            (16-byte rows for TMA): A's factor for row m, K-tile t, zero
//            for tiles that take the float fallback
//   scale_b: (L, K / 32, Np) float32, likewise for B
//   c:       (splits, L, M, N) float32; splits > 1: one partial per K-split
// K is a multiple of TK (the caller zero-pads: zero tiles add nothing).
// Exactness: slices lie in [-64, 64], so a level of at most 3 products sums
// to at most 3 * 32 * 64 * 64 < 2^19 per K-tile, well inside int32, and
// below 2^22, where float's integer trick (mainloop.cuh) is exact; the
// levels' combination may round where it exceeds 2^24.
#pragma once

#include <cstdint>

namespace jaxemu {
namespace mixpert {

constexpr int kTileK = 128;    // K-steps per pipeline stage (one 128-byte swizzle row of int8)
constexpr int kScaleTile = 32;  // K-steps per MixPert tile (one int8 wgmma)
constexpr int kScaleAlign = 4;  // scale_a / scale_b rows padded to this many floats
constexpr int kWarpgroupRows = 64;  // output rows per consumer warpgroup (one 64 x N wgmma)
constexpr int kTileN = 64;          // output columns per tile of the instantiated kernels (inst/*.cu)

struct Problem {
  const int8_t* a = nullptr;
  const int8_t* b = nullptr;
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
  float* c = nullptr;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int sa = 2, sb = 2;  // slices of A and B: MixPert level (l, r) keeps l + 1 and r + 1
  int splits = 1;      // K-splits, each writing its own partial (deterministic)
  int warpgroups = 0;  // consumer warpgroups, 2 or 3 (tiles of 64 rows each); 0: by shape (mixpert_dispatch.cu)
};

// The MixPert split (mixpert/split.cuh): one pass over a float32 operand,
// writing the kernel's slices and each tile's exponent and fallback flag,
// bit for bit the xla backend's split_int8 (jaxemu/backends/xla.py).
//   x:      A (L, R, K) (rows: tiles along K, contiguous), or B (L, K, R)
//           with columns = true (tiles down the columns)
//   slices: (L, R, K / TK, S, TK) int8, the layout `a` / `b` above
//   exps:   rows (L, R, K / 32), columns (L, K / 32, R) int32: E, the tile
//           maximum's exponent plus one (0 for a zero tile)
//   ok:     same shape, uint8: 1 where the tile's nonzero exponents span at
//           most max_spread binades, 0 where it takes the float fallback
// K is a multiple of TK (the caller zero-pads); x holds finite values.
struct SplitProblem {
  const float* x = nullptr;
  int8_t* slices = nullptr;
  int32_t* exps = nullptr;
  uint8_t* ok = nullptr;
  int64_t rows = 0, k = 0, batch = 1;  // rows: M for A, N for B
  int s = 3;                           // slices per value (2 or 3)
  int max_spread = 16;
  bool columns = false;
};

// MixPert's float fallback (mixpert/fallback.cuh): the products of the tiles
// that the fixed-point sum leaves out (scale factor zero), a_bad b + a_good
// b_bad, in FP32 on the CUDA cores, added to C in place. Few tiles fall back
// on real data (0.02-0.07 % on uniform and normal data), scattered over K:
// each flagged tile of A is one 32-value row segment times a 32-row slab of
// B, each flagged tile of B one 32-value column segment times a 32-column
// slab of A's good tiles.
//   c:     (L, M, N) float32, read and written
//   a:     (L, M, K) float32, b: (L, K, N) float32 (finite; K a multiple of TK)
//   ok_a:  (L, M, K / 32) uint8, 1 where A's tile is in the fixed-point sum
//   ok_bt: (L, N, K / 32) uint8, B's flags transposed (a column's contiguous)
//   rows_tiles (columns_tiles): the rows of A (columns of B) with exactly one
//          flagged tile go K-tile by K-tile (fallback.cuh), which needs
//   ok_at: (L, K / 32, Mp) uint8, A's flags transposed (a K-tile's rows
//          contiguous), Mp = M rounded up to kFlagPad, padded with 1;
//   ok_b:  (L, K / 32, Np) uint8, B's flags likewise (a K-tile's columns
//          contiguous). Either may be null where its side is off.
//   work:  (L M + L N + 2) int32 scratch where either side is on: the lists
//          of lines with several flagged tiles (A's rows, B's columns) and
//          their lengths.
// Every element of C is added to once per side, in a fixed order (the rows
// side, then the columns side): the result is deterministic.
constexpr int kFlagPad = 16;  // ok_at / ok_b rows padded to this many bytes (16-byte loads)

// The length of an ok_at / ok_b row: `lines` flags padded to kFlagPad.
constexpr int64_t padded_flags(int64_t lines) { return (lines + kFlagPad - 1) / kFlagPad * kFlagPad; }

struct FallbackProblem {
  float* c = nullptr;
  const float* a = nullptr;
  const float* b = nullptr;
  const uint8_t* ok_a = nullptr;
  const uint8_t* ok_bt = nullptr;
  const uint8_t* ok_at = nullptr;
  const uint8_t* ok_b = nullptr;
  int32_t* work = nullptr;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool rows_tiles = false, columns_tiles = false;
};

}  // namespace mixpert
}  // namespace jaxemu
