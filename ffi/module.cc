// The nanobind module jaxemu._jaxemu_cuda: XLA FFI handlers for the CUDA
// kernels, exported as capsules by registrations() (jax/examples/ffi style),
// plus the few facts the Python side needs to decide what it can run.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "fp32.h"
#include "fused.h"
#include "int8.h"
#include "mixpert.h"
#include "stats.h"
#include "xla/ffi/api/ffi.h"

namespace nb = nanobind;
namespace ffi = xla::ffi;

namespace jaxemu {
namespace {

std::string shape_str(ffi::AnyBuffer::Dimensions d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + ")";
}

// The term attributes of a fused call into p; false when their lengths differ or are not in 1..kMaxTerms.
bool read_terms(ffi::Span<const int64_t> term_a, ffi::Span<const int64_t> term_b, ffi::Span<const int64_t> term_exp,
                ffi::Span<const int64_t> kc_tiles, fused::Problem* p) {
  const size_t nt = term_a.size();
  if (nt < 1 || nt > size_t(fused::kMaxTerms) || term_b.size() != nt || term_exp.size() != nt || kc_tiles.size() != nt)
    return false;
  p->nterms = int(nt);
  for (size_t i = 0; i < nt; ++i) {
    p->term_a[i] = int(term_a[i]);
    p->term_b[i] = int(term_b[i]);
    p->term_exp[i] = int(term_exp[i]);
    p->kc_tiles[i] = int(kc_tiles[i]);
  }
  return true;
}

// The fused emulation GEMM (fused.h): every slice product of one emulated
// product in one launch. A slices (L, M, K/TK, Sa, TK), B slices (L, N, K/TK,
// Sb, TK) of the slice dtype (fused/params.h); row/col exponents (L, M) / (L, N) int32, or empty; out C
// (splits, L, M, N) float32. Special values on the device: with the FP32
// operands a32 (L, M, k) and b32 (L, k, N) (b32_rows: B^T, (L, N, k)), k the
// product's own K, and amax (2,) float32 = max |A|, max |B| (the split
// kernel's), a fix-up after the GEMM recomputes C's values that are not
// finite in FP32 unless amax shows that there are none (fused.h:
// fixup_special; splits == 1). Empty a32, b32: C as the kernel made it (the
// caller decided).
template <fused::SliceType kType, ffi::DataType kDtype>
ffi::Error FusedRun(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer row_exp,
                    ffi::AnyBuffer col_exp, ffi::AnyBuffer a32, ffi::AnyBuffer b32, ffi::AnyBuffer amax,
                    ffi::Result<ffi::AnyBuffer> c, ffi::Span<const int64_t> term_a,
                    ffi::Span<const int64_t> term_b, ffi::Span<const int64_t> term_exp,
                    ffi::Span<const int64_t> kc_tiles, int64_t kc_sub, int64_t splits, int64_t tile_n,
                    int64_t b32_rows, Gate gate = {}) {
  auto da = a.dimensions(), db = b.dimensions(), dc = c->dimensions();
  if (a.element_type() != kDtype || b.element_type() != kDtype)
    return ffi::Error::InvalidArgument("jaxemu fused: slice dtype does not match the target");
  const int64_t tk = fused::tile_k(kType);
  if (da.size() != 5 || db.size() != 5 || dc.size() != 4 || da[4] != tk || db[4] != tk || db[0] != da[0] ||
      db[2] != da[2] || dc[0] != splits || dc[1] != da[0] || dc[2] != da[1] || dc[3] != db[1])
    return ffi::Error::InvalidArgument(
        "jaxemu fused: expected A (L, M, K/TK, Sa, TK), B (L, N, K/TK, Sb, TK) with TK = " + std::to_string(tk) +
        ", C (splits, L, M, N); got " + shape_str(da) + ", " + shape_str(db) + ", " + shape_str(dc));
  if (c->element_type() != ffi::DataType::F32) return ffi::Error::InvalidArgument("jaxemu fused: C must be float32");
  fused::Problem p;
  p.a = a.untyped_data();
  p.b = b.untyped_data();
  p.c = static_cast<float*>(c->untyped_data());
  p.batch = da[0];
  p.m = da[1];
  p.k = da[2] * tk;
  p.sa = int(da[3]);
  p.n = db[1];
  p.sb = int(db[3]);
  p.splits = int(splits);
  p.tile_n = int(tile_n);
  if (!read_terms(term_a, term_b, term_exp, kc_tiles, &p))
    return ffi::Error::InvalidArgument("jaxemu fused: term arrays must have equal lengths in 1..9");
  p.kc_sub = int(kc_sub);
  if (row_exp.element_count() > 0) {
    auto dr = row_exp.dimensions(), dl = col_exp.dimensions();
    if (row_exp.element_type() != ffi::DataType::S32 || col_exp.element_type() != ffi::DataType::S32 ||
        dr.size() != 2 || dl.size() != 2 || dr[0] != p.batch || dr[1] != p.m || dl[0] != p.batch || dl[1] != p.n)
      return ffi::Error::InvalidArgument("jaxemu fused: exponents must be int32 (L, M) and (L, N)");
    p.row_exp = static_cast<const int32_t*>(row_exp.untyped_data());
    p.col_exp = static_cast<const int32_t*>(col_exp.untyped_data());
  }
  const bool specials = a32.element_count() > 0 || b32.element_count() > 0;
  int64_t k32 = 0;
  if (specials) {
    auto d1 = a32.dimensions(), d2 = b32.dimensions();
    k32 = d1.size() == 3 ? d1[2] : -1;
    const bool b_ok = d2.size() == 3 && d2[0] == p.batch &&
                      (b32_rows ? d2[1] == p.n && d2[2] == k32 : d2[1] == k32 && d2[2] == p.n);
    if (a32.element_type() != ffi::DataType::F32 || b32.element_type() != ffi::DataType::F32 || d1.size() != 3 ||
        d1[0] != p.batch || d1[1] != p.m || k32 < 1 || (k32 + tk - 1) / tk * tk != p.k || !b_ok)
      return ffi::Error::InvalidArgument(
          "jaxemu fused: FP32 operands for the special values must be A (L, M, k) and B (L, k, N) (b32_rows: (L, N, k)), "
          "float32, the slices' K = k rounded up to whole K-tiles; got " + shape_str(d1) + ", " + shape_str(d2));
    if (splits != 1) return ffi::Error::InvalidArgument("jaxemu fused: special values on the device need splits == 1");
    if (amax.element_type() != ffi::DataType::F32 || amax.element_count() != 2)
      return ffi::Error::InvalidArgument("jaxemu fused: amax must be max |A| and max |B|, float32 (2,)");
  }
  if (p.m == 0 || p.n == 0 || p.batch == 0) return ffi::Error::Success();
  if (p.k == 0) return ffi::Error::InvalidArgument("jaxemu fused: K = 0 must be handled by the caller");
  std::string why = fused::check(kType, p);
  if (!why.empty()) return ffi::Error::InvalidArgument("jaxemu fused: " + why);
  why = fused::run(kType, p, stream, gate);
  if (why.empty() && specials)
    why = fused::fixup_special(p, static_cast<const float*>(a32.untyped_data()),
                               static_cast<const float*>(b32.untyped_data()), k32, b32_rows != 0,
                               static_cast<const float*>(amax.untyped_data()), stream, gate);
  if (!why.empty()) return ffi::Error::Internal("jaxemu fused: " + why);
  return ffi::Error::Success();
}

template <fused::SliceType kType, ffi::DataType kDtype>
ffi::Error FusedImpl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer row_exp,
                     ffi::AnyBuffer col_exp, ffi::AnyBuffer a32, ffi::AnyBuffer b32, ffi::AnyBuffer amax,
                     ffi::Result<ffi::AnyBuffer> c, ffi::Span<const int64_t> term_a,
                     ffi::Span<const int64_t> term_b, ffi::Span<const int64_t> term_exp,
                     ffi::Span<const int64_t> kc_tiles, int64_t kc_sub, int64_t splits, int64_t tile_n,
                     int64_t b32_rows) {
  return FusedRun<kType, kDtype>(stream, a, b, row_exp, col_exp, a32, b32, amax, c, term_a, term_b, term_exp,
                                 kc_tiles, kc_sub, splits, tile_n, b32_rows);
}

// A gated call's gate (common/gate.h) into *g: `choice` one int32 on the
// device (auto's choice, written by its data test), run_if the choices
// (bits 0..31) for which the call runs.
ffi::Error read_gate(const std::string& who, ffi::AnyBuffer choice, int64_t run_if, Gate* g) {
  if (choice.element_type() != ffi::DataType::S32 || choice.element_count() != 1)
    return ffi::Error::InvalidArgument(who + ": the choice must be one int32, got " +
                                       shape_str(choice.dimensions()));
  if (run_if <= 0 || run_if > int64_t(0xffffffff))
    return ffi::Error::InvalidArgument(who + ": run_if must be a nonempty set of choices 0..31 (bits), got " +
                                       std::to_string(run_if));
  g->choice = static_cast<const int32_t*>(choice.untyped_data());
  g->run_if = uint32_t(run_if);
  return ffi::Error::Success();
}

// jaxemu_fused_* behind a gate (docs/auto.md, "The choice on the device"):
// the GEMM and its fix-up run only where bit `choice` of run_if is set.
// c_in: C as the candidates before this one left it, (1, L, M, N) float32,
// aliased to C (the caller's input_output_aliases): where the gate is
// closed C keeps it; where it is open the GEMM writes C whole (splits ==
// 1: no partial sums for the caller to add). Empty for the first
// candidate: where its gate is closed C is left unwritten, for a later
// candidate to write.
template <fused::SliceType kType, ffi::DataType kDtype>
ffi::Error FusedGatedImpl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer row_exp,
                          ffi::AnyBuffer col_exp, ffi::AnyBuffer a32, ffi::AnyBuffer b32, ffi::AnyBuffer amax,
                          ffi::AnyBuffer choice, ffi::AnyBuffer c_in, ffi::Result<ffi::AnyBuffer> c,
                          ffi::Span<const int64_t> term_a, ffi::Span<const int64_t> term_b,
                          ffi::Span<const int64_t> term_exp, ffi::Span<const int64_t> kc_tiles, int64_t kc_sub,
                          int64_t splits, int64_t tile_n, int64_t b32_rows, int64_t run_if) {
  const std::string who = "jaxemu fused gated";
  Gate gate;
  ffi::Error err = read_gate(who, choice, run_if, &gate);
  if (!err.success()) return err;
  if (splits != 1) return ffi::Error::InvalidArgument(who + ": a gated product writes C whole: splits must be 1");
  auto di = c_in.dimensions(), dc = c->dimensions();
  if (c_in.element_count() > 0) {
    if (c_in.element_type() != ffi::DataType::F32 || di.size() != dc.size() ||
        !std::equal(di.begin(), di.end(), dc.begin()))
      return ffi::Error::InvalidArgument(who + ": c_in must be float32 of C's shape " + shape_str(dc) +
                                         ", or empty, got " + shape_str(di));
    if (c_in.untyped_data() != c->untyped_data())
      return ffi::Error::InvalidArgument(who + ": c_in must be aliased to C (input_output_aliases)");
  }
  return FusedRun<kType, kDtype>(stream, a, b, row_exp, col_exp, a32, b32, amax, c, term_a, term_b, term_exp,
                                 kc_tiles, kc_sub, splits, tile_n, b32_rows, gate);
}

// The operands and attributes the fused GEMM's targets share (plain and gated).
#define JAXEMU_FUSED_OPERANDS                                                                     \
  .Arg<ffi::AnyBuffer>()     /* a: (L, M, K/TK, Sa, TK) */                                        \
      .Arg<ffi::AnyBuffer>() /* b: (L, N, K/TK, Sb, TK) */                                        \
      .Arg<ffi::AnyBuffer>() /* row_exp: (L, M) int32 or empty */                                 \
      .Arg<ffi::AnyBuffer>() /* col_exp: (L, N) int32 or empty */                                 \
      .Arg<ffi::AnyBuffer>() /* a32: (L, M, k) f32 or empty */                                    \
      .Arg<ffi::AnyBuffer>() /* b32: (L, k, N) / (L, N, k) f32 or empty */                        \
      .Arg<ffi::AnyBuffer>() /* amax: (2,) f32 or empty */
#define JAXEMU_FUSED_ATTRS                                                                        \
  .Attr<ffi::Span<const int64_t>>("term_a")                                                       \
      .Attr<ffi::Span<const int64_t>>("term_b")                                                   \
      .Attr<ffi::Span<const int64_t>>("term_exp")                                                 \
      .Attr<ffi::Span<const int64_t>>("kc_tiles")                                                 \
      .Attr<int64_t>("kc_sub")                                                                    \
      .Attr<int64_t>("splits")                                                                    \
      .Attr<int64_t>("tile_n")                                                                    \
      .Attr<int64_t>("b32_rows")

#define JAXEMU_FUSED_HANDLER(name, kind, dtype)                                                   \
  XLA_FFI_DEFINE_HANDLER(name, (FusedImpl<fused::SliceType::kind, ffi::DataType::dtype>),        \
                         ffi::Ffi::Bind()                                                         \
                             .Ctx<ffi::PlatformStream<cudaStream_t>>()                            \
                             JAXEMU_FUSED_OPERANDS                                                \
                             .Ret<ffi::AnyBuffer>()  /* c: (splits, L, M, N) f32 */               \
                             JAXEMU_FUSED_ATTRS);

JAXEMU_FUSED_HANDLER(kFusedBF16, kBF16, BF16)
JAXEMU_FUSED_HANDLER(kFusedFP16, kFP16, F16)
JAXEMU_FUSED_HANDLER(kFusedTF32, kTF32, F32)

#define JAXEMU_FUSED_GATED_HANDLER(name, kind, dtype)                                             \
  XLA_FFI_DEFINE_HANDLER(name, (FusedGatedImpl<fused::SliceType::kind, ffi::DataType::dtype>),   \
                         ffi::Ffi::Bind()                                                         \
                             .Ctx<ffi::PlatformStream<cudaStream_t>>()                            \
                             JAXEMU_FUSED_OPERANDS                                                \
                             .Arg<ffi::AnyBuffer>()  /* choice: () or (1,) int32 */               \
                             .Arg<ffi::AnyBuffer>()  /* c_in: (1, L, M, N) f32 aliased, or (0,) */ \
                             .Ret<ffi::AnyBuffer>()  /* c: (1, L, M, N) f32 */                    \
                             JAXEMU_FUSED_ATTRS                                                   \
                             .Attr<int64_t>("run_if"));

JAXEMU_FUSED_GATED_HANDLER(kFusedBF16Gated, kBF16, BF16)
JAXEMU_FUSED_GATED_HANDLER(kFusedFP16Gated, kFP16, F16)
JAXEMU_FUSED_GATED_HANDLER(kFusedTF32Gated, kTF32, F32)

// The fused GEMM on FP32 operands, split in shared memory (fused.h:
// run_f32; bf16 slices, tf32 with `tf32` set, or fp16 with `fp16` set: then
// row_exp (L, M) and col_exp (L, N) int32 scale A's rows and B's columns by
// 2^e before the cut, and C by 2^-(row + col) after; empty arrays for bf16
// and tf32): a (L, M, K) and b
// (L, K, N) float32; out C (L, M,
// N) float32, and two work buffers the kernel needs: the K-splits' partials
// (splits, L, M, N) float32 (one element when splits == 1) and the
// special-value flag (1,) int32. register_a: the kernels that keep A's
// slices in registers (wgmma's RS form) instead of shared memory.
// exp_headroom >= 0 (fp16): the exponents found in the kernel instead
// (fused/params.h: Problem::item_exp; row_exp and col_exp empty), written to
// the work buffer item_exp, splits (L M + L N) int32 (one element otherwise).
// Then no fix-up runs: flags[0] != 0 tells the caller that an entry of C is
// not finite, a special value or a value past the headroom, and that it must
// redo the product with the pass's exponents (jaxemu/backends/cuda_fused.py).
ffi::Error FusedF32Impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer row_exp,
                        ffi::AnyBuffer col_exp, ffi::Result<ffi::AnyBuffer> c,
                        ffi::Result<ffi::AnyBuffer> partials, ffi::Result<ffi::AnyBuffer> flags,
                        ffi::Result<ffi::AnyBuffer> item_exp,
                        ffi::Span<const int64_t> term_a, ffi::Span<const int64_t> term_b,
                        ffi::Span<const int64_t> term_exp, ffi::Span<const int64_t> kc_tiles, int64_t splits,
                        int64_t slices_a, int64_t slices_b, int64_t lo_scale_bits, int64_t register_a, int64_t fp16,
                        int64_t tf32, int64_t exp_headroom) {
  auto da = a.dimensions(), db = b.dimensions(), dc = c->dimensions();
  if (a.element_type() != ffi::DataType::F32 || b.element_type() != ffi::DataType::F32 ||
      c->element_type() != ffi::DataType::F32 || partials->element_type() != ffi::DataType::F32 ||
      flags->element_type() != ffi::DataType::S32)
    return ffi::Error::InvalidArgument("jaxemu fused f32: a, b, c and partials float32, flags int32");
  if (da.size() != 3 || db.size() != 3 || dc.size() != 3 || db[0] != da[0] || db[1] != da[2] || dc[0] != da[0] ||
      dc[1] != da[1] || dc[2] != db[2])
    return ffi::Error::InvalidArgument("jaxemu fused f32: expected A (L, M, K), B (L, K, N), C (L, M, N); got " +
                                       shape_str(da) + ", " + shape_str(db) + ", " + shape_str(dc));
  fused::Problem p;
  p.a = a.untyped_data();
  p.b = b.untyped_data();
  p.c = static_cast<float*>(c->untyped_data());
  p.batch = da[0];
  p.m = da[1];
  p.k = da[2];
  p.n = db[2];
  p.sa = int(slices_a);
  p.sb = int(slices_b);
  p.splits = int(splits);
  if (!read_terms(term_a, term_b, term_exp, kc_tiles, &p))
    return ffi::Error::InvalidArgument("jaxemu fused: term arrays must have equal lengths in 1..9");
  if (partials->element_count() < (splits > 1 ? splits * p.batch * p.m * p.n : 1) || flags->element_count() < 1)
    return ffi::Error::InvalidArgument("jaxemu fused f32: work buffers too small");
  if (fp16 && exp_headroom >= 0) {
    if (item_exp->element_type() != ffi::DataType::S32 ||
        item_exp->element_count() < size_t(splits * p.batch * (p.m + p.n)))
      return ffi::Error::InvalidArgument("jaxemu fused f32: exponents found in the kernel need an int32 work buffer "
                                         "of splits (L M + L N) elements");
    p.item_exp = static_cast<int32_t*>(item_exp->untyped_data());
    p.exp_headroom = int(exp_headroom);
  } else if (fp16) {
    if (row_exp.element_type() != ffi::DataType::S32 || col_exp.element_type() != ffi::DataType::S32 ||
        row_exp.element_count() != size_t(p.batch * p.m) || col_exp.element_count() != size_t(p.batch * p.n))
      return ffi::Error::InvalidArgument("jaxemu fused f32: fp16 needs row exponents int32 (L, M) and (L, N)");
    p.row_exp = static_cast<const int32_t*>(row_exp.untyped_data());
    p.col_exp = static_cast<const int32_t*>(col_exp.untyped_data());
  }
  fused::SplitProblem cut;
  if (fp16 && tf32) return ffi::Error::InvalidArgument("jaxemu fused f32: fp16 or tf32 slices, not both");
  cut.type = fp16 ? fused::SliceType::kFP16 : tf32 ? fused::SliceType::kTF32 : fused::SliceType::kBF16;
  cut.lo_scale_bits = int(lo_scale_bits);
  fused::SplitF32 f32;
  f32.partials = splits > 1 ? static_cast<float*>(partials->untyped_data()) : nullptr;
  f32.flags = static_cast<int32_t*>(flags->untyped_data());
  f32.register_a = register_a != 0;
  if (p.m == 0 || p.n == 0 || p.batch == 0) {  // nothing to compute; the flag the caller reads says so
    const cudaError_t e = cudaMemsetAsync(f32.flags, 0, sizeof(int32_t), stream);
    return e == cudaSuccess ? ffi::Error::Success()
                            : ffi::Error::Internal(std::string("jaxemu fused f32: flag reset: ") + cudaGetErrorString(e));
  }
  if (p.k == 0) return ffi::Error::InvalidArgument("jaxemu fused f32: K = 0 must be handled by the caller");
  std::string why = fused::check_f32(p, cut, f32);
  if (!why.empty()) return ffi::Error::InvalidArgument("jaxemu fused f32: " + why);
  why = fused::run_f32(p, cut, f32, stream);
  if (!why.empty()) return ffi::Error::Internal("jaxemu fused f32: " + why);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(kFusedF32, FusedF32Impl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()  // a: (L, M, K) f32
                           .Arg<ffi::AnyBuffer>()  // b: (L, K, N) f32
                           .Arg<ffi::AnyBuffer>()  // row_exp: (L, M) int32 (fp16), else empty
                           .Arg<ffi::AnyBuffer>()  // col_exp: (L, N) int32 (fp16), else empty
                           .Ret<ffi::AnyBuffer>()  // c: (L, M, N) f32
                           .Ret<ffi::AnyBuffer>()  // partials: (splits, L, M, N) f32, or (1,)
                           .Ret<ffi::AnyBuffer>()  // flags: (1,) int32 (the caller's to read: exp_headroom >= 0)
                           .Ret<ffi::AnyBuffer>()  // item_exp: splits (L M + L N) int32 (exp_headroom >= 0), or (1,)
                           .Attr<ffi::Span<const int64_t>>("term_a")
                           .Attr<ffi::Span<const int64_t>>("term_b")
                           .Attr<ffi::Span<const int64_t>>("term_exp")
                           .Attr<ffi::Span<const int64_t>>("kc_tiles")
                           .Attr<int64_t>("splits")
                           .Attr<int64_t>("slices_a")
                           .Attr<int64_t>("slices_b")
                           .Attr<int64_t>("lo_scale_bits")
                           .Attr<int64_t>("register_a")  // A's slices in registers (traits_f32.cuh)
                           .Attr<int64_t>("fp16")        // fp16 slices, rows scaled (row_exp, col_exp)
                           .Attr<int64_t>("tf32")        // tf32 slices (else bf16, unless fp16)
                           .Attr<int64_t>("exp_headroom"));  // >= 0: fp16's exponents found in the kernel

// What the split handlers share (fused/params.h: SplitProblem), each check
// an InvalidArgument prefixed by `who`: x (L, R, K), or (L, K, R) with
// `transposed`, float32; the slices `out` (L, R, K_out / TK, S, TK) of the
// slice dtype (slice_type 0 bf16, 1 fp16, 2 tf32); S, lo_scale_bits and
// truncate; amax (1,) int32 (SplitProblem::amax_bits). Into *p.
ffi::Error split_problem(const std::string& who, ffi::AnyBuffer x, ffi::AnyBuffer out, ffi::AnyBuffer amax,
                         int64_t slice_type, int64_t lo_scale_bits, int64_t truncate, int64_t transposed,
                         fused::SplitProblem* p) {
  auto dx = x.dimensions(), dout = out.dimensions();
  if (slice_type < 0 || slice_type > 2) return ffi::Error::InvalidArgument(who + ": bad slice type");
  p->type = slice_type == 0 ? fused::SliceType::kBF16 : slice_type == 1 ? fused::SliceType::kFP16 : fused::SliceType::kTF32;
  const ffi::DataType want = slice_type == 0 ? ffi::DataType::BF16 : slice_type == 1 ? ffi::DataType::F16 : ffi::DataType::F32;
  if (x.element_type() != ffi::DataType::F32 || out.element_type() != want)
    return ffi::Error::InvalidArgument(who + ": x must be float32 and the slices of the slice dtype");
  const int64_t tk = fused::tile_k(p->type);
  if (dx.size() != 3 || dout.size() != 5 || dout[4] != tk)
    return ffi::Error::InvalidArgument(who + ": expected x (L, R, K) or (L, K, R) and slices (L, R, K/TK, S, "
                                       "TK) with TK = " + std::to_string(tk) + "; got " + shape_str(dx) + ", " +
                                       shape_str(dout));
  if (dout[3] < 1 || dout[3] > fused::kMaxSlices || lo_scale_bits < 0 || lo_scale_bits > 14)
    return ffi::Error::InvalidArgument(who + ": 1.." + std::to_string(fused::kMaxSlices) +
                                       " slices and lo_scale_bits in 0..14");
  p->transposed = transposed != 0;
  p->batch = dx[0];
  p->rows = p->transposed ? dx[2] : dx[1];
  p->k = p->transposed ? dx[1] : dx[2];
  p->k_out = dout[2] * tk;
  p->slices = int(dout[3]);
  p->lo_scale_bits = int(lo_scale_bits);
  p->truncate = truncate != 0;
  if (dout[0] != p->batch || dout[1] != p->rows)
    return ffi::Error::InvalidArgument(who + ": shapes do not match: x " + shape_str(dx) + ", slices " +
                                       shape_str(dout));
  p->x = static_cast<const float*>(x.untyped_data());
  p->out = out.untyped_data();
  if (amax.element_type() != ffi::DataType::S32 || amax.element_count() != 1)
    return ffi::Error::InvalidArgument(who + ": amax must be one int32");
  p->amax_bits = static_cast<int32_t*>(amax.untyped_data());
  return ffi::Error::Success();
}

// fp16's row exponents found by the split into found_exp (L, R) int32
// (SplitProblem::exp_out).
ffi::Error split_found_exp(const std::string& who, ffi::AnyBuffer found_exp, fused::SplitProblem* p) {
  auto de = found_exp.dimensions();
  if (found_exp.element_type() != ffi::DataType::S32 || de.size() != 2 || de[0] != p->batch || de[1] != p->rows)
    return ffi::Error::InvalidArgument(who + ": found exponents must be int32 (L, R), got " + shape_str(de));
  p->exp_out = static_cast<int32_t*>(found_exp.untyped_data());
  return ffi::Error::Success();
}

// fused::check (InvalidArgument), then amax zeroed and the split launched.
ffi::Error split_launch(const std::string& who, const fused::SplitProblem& p, cudaStream_t stream, Gate gate = {}) {
  std::string why = fused::check(p);
  if (!why.empty()) return ffi::Error::InvalidArgument(who + ": " + why);
  cudaError_t e = cudaMemsetAsync(p.amax_bits, 0, sizeof(int32_t), stream);
  if (e != cudaSuccess) return ffi::Error::Internal(who + ": memset: " + cudaGetErrorString(e));
  why = fused::run(p, stream, gate);
  if (!why.empty()) return ffi::Error::Internal(who + ": " + why);
  return ffi::Error::Success();
}

// The fused path's operand split (fused/params.h: SplitProblem): x (L, R, K),
// or (L, K, R) with `transposed`, float32; row exponents (L, R) int32 or
// empty -> slices (L, R, K_out / TK, S, TK) of the slice dtype, the bits of
// max |x| (1,) int32 (SplitProblem::amax_bits), and, with `find_exp`, fp16's
// row exponents found by the split (L, R) int32 (SplitProblem::exp_out;
// row_exp empty; K_out <= kSplitExpBlockMaxK = 8192, fused::check's
// refusal), else one unused int32.
ffi::Error FusedSplitRun(const std::string& who, cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer row_exp,
                         ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> amax,
                         ffi::Result<ffi::AnyBuffer> found_exp, int64_t slice_type, int64_t lo_scale_bits,
                         int64_t truncate, int64_t transposed, int64_t find_exp, Gate gate = {}) {
  fused::SplitProblem p;
  ffi::Error err = split_problem(who, x, *out, *amax, slice_type, lo_scale_bits, truncate, transposed, &p);
  if (!err.success()) return err;
  if (row_exp.element_count() > 0) {
    auto de = row_exp.dimensions();
    if (row_exp.element_type() != ffi::DataType::S32 || de.size() != 2 || de[0] != p.batch || de[1] != p.rows)
      return ffi::Error::InvalidArgument(who + ": row exponents must be int32 (L, R), got " + shape_str(de));
    p.exp = static_cast<const int32_t*>(row_exp.untyped_data());
  }
  if (find_exp) {
    err = split_found_exp(who, *found_exp, &p);
    if (!err.success()) return err;
  }
  return split_launch(who, p, stream, gate);
}

ffi::Error FusedSplitImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer row_exp,
                          ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> amax,
                          ffi::Result<ffi::AnyBuffer> found_exp, int64_t slice_type, int64_t lo_scale_bits,
                          int64_t truncate, int64_t transposed, int64_t find_exp) {
  return FusedSplitRun("jaxemu fused split", stream, x, row_exp, out, amax, found_exp, slice_type, lo_scale_bits,
                       truncate, transposed, find_exp);
}

// jaxemu_fused_split behind a gate (read_gate): the split runs only where
// bit `choice` of run_if is set; elsewhere its outputs are left unwritten
// (amax zeroed), for a gated GEMM of the same candidate that does not run.
ffi::Error FusedSplitGatedImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer row_exp, ffi::AnyBuffer choice,
                               ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> amax,
                               ffi::Result<ffi::AnyBuffer> found_exp, int64_t slice_type, int64_t lo_scale_bits,
                               int64_t truncate, int64_t transposed, int64_t find_exp, int64_t run_if) {
  const std::string who = "jaxemu fused split gated";
  Gate gate;
  ffi::Error err = read_gate(who, choice, run_if, &gate);
  if (!err.success()) return err;
  // (K = 0: the exponents' memset runs whatever the gate says; a gated
  // product has K > 0, auto returns zeros before.)
  if (x.element_count() == 0) return ffi::Error::InvalidArgument(who + ": a gated split needs a nonempty operand");
  return FusedSplitRun(who, stream, x, row_exp, out, amax, found_exp, slice_type, lo_scale_bits, truncate,
                       transposed, find_exp, gate);
}

XLA_FFI_DEFINE_HANDLER(kFusedSplit, FusedSplitImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()   // x: (L, R, K) or (L, K, R) float32
                           .Arg<ffi::AnyBuffer>()   // row_exp: (L, R) int32 or empty
                           .Ret<ffi::AnyBuffer>()   // slices: (L, R, K/TK, S, TK)
                           .Ret<ffi::AnyBuffer>()   // amax: (1,) int32, bits of max |x|
                           .Ret<ffi::AnyBuffer>()   // found_exp: (L, R) int32 with find_exp, else (1,)
                           .Attr<int64_t>("slice_type")      // 0 bf16, 1 fp16, 2 tf32
                           .Attr<int64_t>("lo_scale_bits")
                           .Attr<int64_t>("truncate")
                           .Attr<int64_t>("transposed")
                           .Attr<int64_t>("find_exp"));  // 1: fp16's row exponents found by the split

XLA_FFI_DEFINE_HANDLER(kFusedSplitGated, FusedSplitGatedImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()   // x
                           .Arg<ffi::AnyBuffer>()   // row_exp
                           .Arg<ffi::AnyBuffer>()   // choice: () or (1,) int32
                           .Ret<ffi::AnyBuffer>()   // slices
                           .Ret<ffi::AnyBuffer>()   // amax
                           .Ret<ffi::AnyBuffer>()   // found_exp
                           .Attr<int64_t>("slice_type")
                           .Attr<int64_t>("lo_scale_bits")
                           .Attr<int64_t>("truncate")
                           .Attr<int64_t>("transposed")
                           .Attr<int64_t>("find_exp")
                           .Attr<int64_t>("run_if"));  // the choices (bits) for which the split runs

// fp16's split of A that finds its row exponents (jaxemu_fused_split with
// find_exp) and computes auto's row statistics of A in the same read of
// each row (SplitProblem::stats_out: the statistics of jaxemu_row_stats,
// the same layout): x (L, R, K) float32 (rows, not transposed), probe (L,
// K) float32 (finite), or empty for the four extremes alone -> slices (L,
// R, K_out / 64, S, 64) float16 (K_out: a multiple of 64 covering K, at
// most kSplitExpBlockMaxK = 8192), amax (1,) int32 (the bits of max |x|),
// found_exp (L, R) int32, stats (8, L, R) float32 with the probe, (4, L, R)
// without. slice_type must be 1 (fp16).
ffi::Error FusedSplitStatsImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer probe,
                               ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> amax,
                               ffi::Result<ffi::AnyBuffer> found_exp, ffi::Result<ffi::AnyBuffer> stats,
                               int64_t slice_type, int64_t lo_scale_bits, int64_t truncate) {
  const std::string who = "jaxemu fused split stats";
  if (slice_type != 1)
    return ffi::Error::InvalidArgument(who + ": slice_type must be 1 (fp16: the statistics come with fp16's row "
                                       "exponents found by the split), got " + std::to_string(slice_type));
  fused::SplitProblem p;
  ffi::Error err = split_problem(who, x, *out, *amax, slice_type, lo_scale_bits, truncate, 0, &p);
  if (!err.success()) return err;
  if (p.k_out > fused::kSplitExpBlockMaxK)
    return ffi::Error::InvalidArgument(who + ": rows of K_out <= " + std::to_string(fused::kSplitExpBlockMaxK) +
                                       " values (the slices' K_out, K rounded up to whole K-tiles of 64); got "
                                       "K_out = " + std::to_string(p.k_out) + " for x " + shape_str(x.dimensions()));
  err = split_found_exp(who, *found_exp, &p);
  if (!err.success()) return err;
  auto dv = probe.dimensions(), ds = stats->dimensions();
  const bool with_probe = probe.element_count() > 0 || dv.size() == 2;  // (an empty probe: the extremes alone)
  if (with_probe &&
      (probe.element_type() != ffi::DataType::F32 || dv.size() != 2 || dv[0] != p.batch || dv[1] != p.k))
    return ffi::Error::InvalidArgument(who + ": the probe must be float32 (L, K) = (" + std::to_string(p.batch) +
                                       ", " + std::to_string(p.k) + "), or empty (0,), got " + shape_str(dv));
  const int64_t n_stats = with_probe ? 8 : 4;
  if (stats->element_type() != ffi::DataType::F32 || ds.size() != 3 || ds[0] != n_stats || ds[1] != p.batch ||
      ds[2] != p.rows)
    return ffi::Error::InvalidArgument(who + ": the statistics must be float32 (" + std::to_string(n_stats) +
                                       ", L, R) = (" + std::to_string(n_stats) + ", " + std::to_string(p.batch) +
                                       ", " + std::to_string(p.rows) + "), got " + shape_str(ds));
  p.probe = with_probe ? static_cast<const float*>(probe.untyped_data()) : nullptr;
  p.stats_probe = with_probe;
  p.stats_out = static_cast<float*>(stats->untyped_data());
  return split_launch(who, p, stream);
}

XLA_FFI_DEFINE_HANDLER(kFusedSplitStats, FusedSplitStatsImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()   // x: (L, R, K) float32
                           .Arg<ffi::AnyBuffer>()   // probe: (L, K) float32, or (0,): no probe
                           .Ret<ffi::AnyBuffer>()   // slices: (L, R, K/64, S, 64) float16
                           .Ret<ffi::AnyBuffer>()   // amax: (1,) int32, bits of max |x|
                           .Ret<ffi::AnyBuffer>()   // found_exp: (L, R) int32
                           .Ret<ffi::AnyBuffer>()   // stats: (8, L, R) float32, (4, L, R) without a probe
                           .Attr<int64_t>("slice_type")      // 1 (fp16) only
                           .Attr<int64_t>("lo_scale_bits")
                           .Attr<int64_t>("truncate"));

// jaxemu's FP32 GEMM behind a gate (fp32.h; docs/auto.md, "The choice on
// the device"): a (L, M, K), b (L, K, N) float32; choice one int32, run_if
// the choices it runs for (read_gate); c_in C as the earlier candidates
// left it, (L, M, N) float32 aliased to C, or empty for the first -> C
// (L, M, N) float32, FP32's product where the gate is open.
ffi::Error Fp32GatedImpl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer choice,
                         ffi::AnyBuffer c_in, ffi::Result<ffi::AnyBuffer> c, int64_t run_if) {
  const std::string who = "jaxemu fp32 gated";
  Gate gate;
  ffi::Error err = read_gate(who, choice, run_if, &gate);
  if (!err.success()) return err;
  auto da = a.dimensions(), db = b.dimensions(), dc = c->dimensions(), di = c_in.dimensions();
  if (a.element_type() != ffi::DataType::F32 || b.element_type() != ffi::DataType::F32 ||
      c->element_type() != ffi::DataType::F32 || da.size() != 3 || db.size() != 3 || dc.size() != 3 ||
      db[0] != da[0] || db[1] != da[2] || dc[0] != da[0] || dc[1] != da[1] || dc[2] != db[2])
    return ffi::Error::InvalidArgument(who + ": expected float32 A (L, M, K), B (L, K, N), C (L, M, N); got " +
                                       shape_str(da) + ", " + shape_str(db) + ", " + shape_str(dc));
  if (c_in.element_count() > 0 &&
      (c_in.element_type() != ffi::DataType::F32 || di.size() != 3 || !std::equal(di.begin(), di.end(), dc.begin()) ||
       c_in.untyped_data() != c->untyped_data()))
    return ffi::Error::InvalidArgument(who + ": c_in must be float32 of C's shape, aliased to C, or empty; got " +
                                       shape_str(di));
  fp32::Problem p;
  p.a = static_cast<const float*>(a.untyped_data());
  p.b = static_cast<const float*>(b.untyped_data());
  p.c = static_cast<float*>(c->untyped_data());
  p.batch = da[0], p.m = da[1], p.k = da[2], p.n = db[2];
  std::string why = fp32::check(p);
  if (!why.empty()) return ffi::Error::InvalidArgument(who + ": " + why);
  why = fp32::run(p, stream, gate);
  if (!why.empty()) return ffi::Error::Internal(who + ": " + why);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(kFp32Gated, Fp32GatedImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()   // a: (L, M, K) f32
                           .Arg<ffi::AnyBuffer>()   // b: (L, K, N) f32
                           .Arg<ffi::AnyBuffer>()   // choice: () or (1,) int32
                           .Arg<ffi::AnyBuffer>()   // c_in: (L, M, N) f32 aliased to c, or (0,)
                           .Ret<ffi::AnyBuffer>()   // c: (L, M, N) f32
                           .Attr<int64_t>("run_if"));

// The int8 GEMM (int8.h): A (L, M, K) int8, B (L, N, K) int8 -> C (L, M, N)
// int32, exact (K <= 131071, multiple of 16; N a multiple of 4), or, with
// moduli (jaxemu_int8_gemm_residues), C mod m_(l / (L / nmod)) as uint8 (N a
// multiple of 16). Its device workspace (stream-K partials) is a second
// result that XLA allocates, sized by int8_workspace_bytes at trace time:
// FFI's ScratchAllocator returned no memory on jax 0.11.2 (H100), and a
// result is what XLA's own GEMMs use.
ffi::Error Int8Gemm(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> c,
                    ffi::Result<ffi::AnyBuffer> workspace, const std::vector<int64_t>* moduli) {
  auto da = a.dimensions(), db = b.dimensions(), dc = c->dimensions();
  const ffi::DataType c_type = moduli ? ffi::DataType::U8 : ffi::DataType::S32;
  if (a.element_type() != ffi::DataType::S8 || b.element_type() != ffi::DataType::S8 || c->element_type() != c_type)
    return ffi::Error::InvalidArgument(std::string("jaxemu int8 gemm: A and B must be int8, C ") +
                                       (moduli ? "uint8 (residues)" : "int32"));
  if (da.size() != 3 || db.size() != 3 || dc.size() != 3 || db[0] != da[0] || db[2] != da[2] || dc[0] != da[0] ||
      dc[1] != da[1] || dc[2] != db[1])
    return ffi::Error::InvalidArgument("jaxemu int8 gemm: expected A (L, M, K), B (L, N, K), C (L, M, N); got " +
                                       shape_str(da) + ", " + shape_str(db) + ", " + shape_str(dc));
  int8::GemmProblem p;
  p.a = static_cast<const int8_t*>(a.untyped_data());
  p.b = static_cast<const int8_t*>(b.untyped_data());
  p.batch = da[0];
  p.m = da[1];
  p.n = db[1];
  p.k = da[2];
  if (moduli) {
    p.r = static_cast<uint8_t*>(c->untyped_data());
    std::string why = int8::setup_gemm_residues(*moduli, &p);
    if (!why.empty()) return ffi::Error::InvalidArgument("jaxemu int8 gemm: " + why);
  } else {
    p.c = static_cast<int32_t*>(c->untyped_data());
  }
  if (p.batch == 0 || p.m == 0 || p.n == 0) return ffi::Error::Success();
  if (p.k == 0) return ffi::Error::InvalidArgument("jaxemu int8 gemm: K = 0 must be handled by the caller");
  std::string why = int8::check(p);
  if (!why.empty()) return ffi::Error::InvalidArgument("jaxemu int8 gemm: " + why);
  const int sms = int8::sm_count();
  const int8::GemmConfig cfg = int8::choose(p, sms);
  const size_t need = int8::workspace_size(cfg, p, sms);
  if (workspace->size_bytes() < need)
    return ffi::Error::InvalidArgument("jaxemu int8 gemm: workspace of " + std::to_string(workspace->size_bytes()) +
                                       " bytes < " + std::to_string(need) + " needed on this GPU (" +
                                       std::to_string(sms) + " SMs): traced for a GPU with fewer SMs?");
  why = int8::run(cfg, p, sms, need ? workspace->untyped_data() : nullptr, stream);
  if (!why.empty()) return ffi::Error::Internal("jaxemu int8 gemm: " + why);
  return ffi::Error::Success();
}

ffi::Error Int8GemmImpl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> c,
                        ffi::Result<ffi::AnyBuffer> workspace) {
  return Int8Gemm(stream, a, b, c, workspace, nullptr);
}

ffi::Error Int8GemmResiduesImpl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                                ffi::Result<ffi::AnyBuffer> c, ffi::Result<ffi::AnyBuffer> workspace,
                                ffi::Span<const int64_t> moduli) {
  const std::vector<int64_t> mods(moduli.begin(), moduli.end());
  return Int8Gemm(stream, a, b, c, workspace, &mods);
}

XLA_FFI_DEFINE_HANDLER(kInt8Gemm, Int8GemmImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()   // a: (L, M, K) int8
                           .Arg<ffi::AnyBuffer>()   // b: (L, N, K) int8
                           .Ret<ffi::AnyBuffer>()   // c: (L, M, N) int32
                           .Ret<ffi::AnyBuffer>()); // workspace: (bytes,) uint8

XLA_FFI_DEFINE_HANDLER(kInt8GemmResidues, Int8GemmResiduesImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()   // a: (L, M, K) int8
                           .Arg<ffi::AnyBuffer>()   // b: (L, N, K) int8
                           .Ret<ffi::AnyBuffer>()   // r: (L, M, N) uint8
                           .Ret<ffi::AnyBuffer>()   // workspace: (bytes,) uint8
                           .Attr<ffi::Span<const int64_t>>("moduli"));

// The Ozaki II residues of one operand (int8.h: ResidueProblem): x (L, R, K),
// or (L, K, R) with `transposed`, float32 or float64; exponents (L, R) int32
// -> residues (nmod, L, R_out, K_out) int8, K contiguous, zero-padded.
ffi::Error OzakiResiduesImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer exp,
                             ffi::Result<ffi::AnyBuffer> out, ffi::Span<const int64_t> moduli, int64_t transposed) {
  auto dx = x.dimensions(), de = exp.dimensions(), dout = out->dimensions();
  const bool f64 = x.element_type() == ffi::DataType::F64;
  if ((!f64 && x.element_type() != ffi::DataType::F32) || exp.element_type() != ffi::DataType::S32 ||
      out->element_type() != ffi::DataType::S8)
    return ffi::Error::InvalidArgument("jaxemu ozaki2 residues: x must be float32 or float64, exponents int32, "
                                       "residues int8");
  if (dx.size() != 3 || de.size() != 2 || dout.size() != 4)
    return ffi::Error::InvalidArgument("jaxemu ozaki2 residues: expected x (L, R, K) or (L, K, R), exponents (L, R), "
                                       "residues (nmod, L, R_out, K_out); got " + shape_str(dx) + ", " +
                                       shape_str(de) + ", " + shape_str(dout));
  int8::ResidueProblem p;
  std::string why = int8::setup_residues(std::vector<int64_t>(moduli.begin(), moduli.end()), &p);
  if (!why.empty()) return ffi::Error::InvalidArgument("jaxemu ozaki2 residues: " + why);
  p.transposed = transposed != 0;
  p.f64 = f64;
  p.batch = dx[0];
  p.rows = p.transposed ? dx[2] : dx[1];
  p.k = p.transposed ? dx[1] : dx[2];
  p.rows_out = dout[2];
  p.k_out = dout[3];
  if (dout[0] != p.nmod || dout[1] != p.batch || de[0] != p.batch || de[1] != p.rows)
    return ffi::Error::InvalidArgument("jaxemu ozaki2 residues: shapes do not match: x " + shape_str(dx) +
                                       ", exponents " + shape_str(de) + ", residues " + shape_str(dout));
  p.x = x.untyped_data();
  p.exp = static_cast<const int32_t*>(exp.untyped_data());
  p.out = static_cast<int8_t*>(out->untyped_data());
  why = int8::check(p);
  if (!why.empty()) return ffi::Error::InvalidArgument("jaxemu ozaki2 residues: " + why);
  why = int8::run(p, stream);
  if (!why.empty()) return ffi::Error::Internal("jaxemu ozaki2 residues: " + why);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(kOzakiResidues, OzakiResiduesImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()   // x: (L, R, K) or (L, K, R) float32 / float64
                           .Arg<ffi::AnyBuffer>()   // exp: (L, R) int32
                           .Ret<ffi::AnyBuffer>()   // residues: (nmod, L, R_out, K_out) int8
                           .Attr<ffi::Span<const int64_t>>("moduli")
                           .Attr<int64_t>("transposed"));

// The Ozaki II reconstruction (int8.h): raw products P (nmod, L, M, N) int32
// (or their residues, uint8: jaxemu_int8_gemm_residues), row exponents
// (L, M), column exponents (L, N) int32 -> C (L, M, N) float32 or float64.
ffi::Error OzakiCrtImpl(cudaStream_t stream, ffi::AnyBuffer prod, ffi::AnyBuffer row_exp, ffi::AnyBuffer col_exp,
                        ffi::Result<ffi::AnyBuffer> c, ffi::Span<const int64_t> moduli) {
  auto dp = prod.dimensions(), dr = row_exp.dimensions(), dl = col_exp.dimensions(), dc = c->dimensions();
  const bool f64 = c->element_type() == ffi::DataType::F64;
  const bool residues = prod.element_type() == ffi::DataType::U8;
  if ((!residues && prod.element_type() != ffi::DataType::S32) || row_exp.element_type() != ffi::DataType::S32 ||
      col_exp.element_type() != ffi::DataType::S32 || (!f64 && c->element_type() != ffi::DataType::F32))
    return ffi::Error::InvalidArgument("jaxemu ozaki2 crt: products must be int32 (or their residues uint8), "
                                       "exponents int32, C float32 or float64");
  if (dp.size() != 4 || dr.size() != 2 || dl.size() != 2 || dc.size() != 3 || dp[0] != int64_t(moduli.size()) ||
      dc[0] != dp[1] || dc[1] != dp[2] || dc[2] != dp[3] || dr[0] != dp[1] || dr[1] != dp[2] || dl[0] != dp[1] ||
      dl[1] != dp[3])
    return ffi::Error::InvalidArgument("jaxemu ozaki2 crt: expected P (nmod, L, M, N), exponents (L, M) and (L, N), "
                                       "C (L, M, N); got " + shape_str(dp) + ", " + shape_str(dr) + ", " +
                                       shape_str(dl) + ", " + shape_str(dc));
  int8::CrtProblem p;
  std::string why = int8::setup_crt(std::vector<int64_t>(moduli.begin(), moduli.end()), &p);
  if (!why.empty()) return ffi::Error::InvalidArgument("jaxemu ozaki2 crt: " + why);
  if (residues) p.r = static_cast<const uint8_t*>(prod.untyped_data());
  else p.p = static_cast<const int32_t*>(prod.untyped_data());
  p.row_exp = static_cast<const int32_t*>(row_exp.untyped_data());
  p.col_exp = static_cast<const int32_t*>(col_exp.untyped_data());
  if (f64) p.c64 = static_cast<double*>(c->untyped_data());
  else p.c = static_cast<float*>(c->untyped_data());
  p.batch = dp[1];
  p.m = dp[2];
  p.n = dp[3];
  why = int8::run(p, stream);
  if (!why.empty()) return ffi::Error::Internal("jaxemu ozaki2 crt: " + why);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(kOzakiCrt, OzakiCrtImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()   // products: (nmod, L, M, N) int32, or uint8 residues
                           .Arg<ffi::AnyBuffer>()   // row_exp: (L, M) int32
                           .Arg<ffi::AnyBuffer>()   // col_exp: (L, N) int32
                           .Ret<ffi::AnyBuffer>()   // c: (L, M, N) float32 or float64
                           .Attr<ffi::Span<const int64_t>>("moduli"));

// auto's data test, the row statistics of one operand (stats.h): A (L, R, K)
// float32, float16 or bfloat16; probe v (L, K) float32 or empty; out
// (4 or 8, L, R) float32 (8 with a probe).
ffi::Error RowStatsImpl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer v, ffi::Result<ffi::AnyBuffer> out,
                        int64_t lanes) {
  auto da = a.dimensions(), dv = v.dimensions(), dout = out->dimensions();
  stats::RowStatsProblem p;
  switch (a.element_type()) {
    case ffi::DataType::F32: p.element = stats::Element::kF32; break;
    case ffi::DataType::F16: p.element = stats::Element::kF16; break;
    case ffi::DataType::BF16: p.element = stats::Element::kBF16; break;
    default: return ffi::Error::InvalidArgument("jaxemu row stats: A must be float32, float16 or bfloat16");
  }
  const bool probe = v.element_count() > 0;
  const int64_t n_stats = probe ? 8 : 4;
  if (da.size() != 3 || dout.size() != 3 || dout[0] != n_stats || dout[1] != da[0] || dout[2] != da[1] ||
      (probe && (dv.size() != 2 || dv[0] != da[0] || dv[1] != da[2])))
    return ffi::Error::InvalidArgument("jaxemu row stats: expected A (L, R, K), v (L, K) or empty, out (" +
                                       std::to_string(n_stats) + ", L, R); got " + shape_str(da) + ", " +
                                       shape_str(dv) + ", " + shape_str(dout));
  if (out->element_type() != ffi::DataType::F32 || (probe && v.element_type() != ffi::DataType::F32))
    return ffi::Error::InvalidArgument("jaxemu row stats: v and out must be float32");
  p.a = a.untyped_data();
  p.v = probe ? static_cast<const float*>(v.untyped_data()) : nullptr;
  p.out = static_cast<float*>(out->untyped_data());
  p.batch = da[0];
  p.rows = da[1];
  p.k = da[2];
  p.lanes = int(lanes);
  if (lanes != 4 && lanes != 8 && lanes != 16 && lanes != 32)
    return ffi::Error::InvalidArgument("jaxemu row stats: lanes must be 4, 8, 16 or 32, got " + std::to_string(lanes));
  std::string why = stats::run(p, stream);
  if (!why.empty()) return ffi::Error::Internal("jaxemu row stats: " + why);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(kRowStats, RowStatsImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()   // a: (L, R, K)
                           .Arg<ffi::AnyBuffer>()   // v: (L, K) float32 or empty
                           .Ret<ffi::AnyBuffer>()   // out: (4 or 8, L, R) float32
                           .Attr<int64_t>("lanes"));  // threads per short row

// The column statistics of B (L, K, N): partial (chunks, 4, L, N) is the
// first launch's output, out (4, L, N) the result (stats/params.h).
ffi::Error ColStatsImpl(cudaStream_t stream, ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> partial,
                        ffi::Result<ffi::AnyBuffer> out) {
  auto db = b.dimensions(), dp = partial->dimensions(), dout = out->dimensions();
  stats::ColStatsProblem p;
  switch (b.element_type()) {
    case ffi::DataType::F32: p.element = stats::Element::kF32; break;
    case ffi::DataType::F16: p.element = stats::Element::kF16; break;
    case ffi::DataType::BF16: p.element = stats::Element::kBF16; break;
    default: return ffi::Error::InvalidArgument("jaxemu column stats: B must be float32, float16 or bfloat16");
  }
  if (db.size() != 3 || dout.size() != 3 || dout[0] != 4 || dout[1] != db[0] || dout[2] != db[2] ||
      dp.size() != 4 || dp[1] != 4 || dp[2] != db[0] || dp[3] != db[2])
    return ffi::Error::InvalidArgument("jaxemu column stats: expected B (L, K, N), partial (chunks, 4, L, N), out (4, "
                                       "L, N); got " + shape_str(db) + ", " + shape_str(dp) + ", " + shape_str(dout));
  if (out->element_type() != ffi::DataType::F32 || partial->element_type() != ffi::DataType::F32)
    return ffi::Error::InvalidArgument("jaxemu column stats: partial and out must be float32");
  p.b = b.untyped_data();
  p.partial = static_cast<float*>(partial->untyped_data());
  p.out = static_cast<float*>(out->untyped_data());
  p.batch = db[0];
  p.k = db[1];
  p.cols = db[2];
  p.chunks = dp[0];
  std::string why = stats::run(p, stream);
  if (!why.empty()) return ffi::Error::Internal("jaxemu column stats: " + why);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(kColStats, ColStatsImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()   // b: (L, K, N)
                           .Ret<ffi::AnyBuffer>()   // partial: (chunks, 4, L, N) float32
                           .Ret<ffi::AnyBuffer>());  // out: (4, L, N) float32

// The MixPert kernel (mixpert.h): A slices (L, M, K/TK, Sa, TK) int8, B
// slices (L, N, K/TK, Sb, TK) int8, scale factors (L, K/32, Mp) and (L,
// K/32, Np) float32 (rows padded to a multiple of 4) -> C (splits, L, M, N)
// float32 (mixpert/params.h). warpgroups: the kernel's consumer
// warpgroups, 2 or 3, or 0: chosen by shape (mixpert_dispatch.cu).
ffi::Error MixpertImpl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer scale_a,
                       ffi::AnyBuffer scale_b, ffi::Result<ffi::AnyBuffer> c, int32_t warpgroups) {
  auto da = a.dimensions(), db = b.dimensions(), dsa = scale_a.dimensions(), dsb = scale_b.dimensions();
  auto dc = c->dimensions();
  if (a.element_type() != ffi::DataType::S8 || b.element_type() != ffi::DataType::S8 ||
      scale_a.element_type() != ffi::DataType::F32 || scale_b.element_type() != ffi::DataType::F32 ||
      c->element_type() != ffi::DataType::F32)
    return ffi::Error::InvalidArgument("jaxemu mixpert: slices must be int8, scale factors and C float32");
  constexpr int64_t tk = mixpert::kTileK, align = mixpert::kScaleAlign;
  const bool ok = da.size() == 5 && db.size() == 5 && dsa.size() == 3 && dsb.size() == 3 && dc.size() == 4 &&
                  da[4] == tk && db[4] == tk && db[0] == da[0] && db[2] == da[2] && dc[1] == da[0] &&
                  dc[2] == da[1] && dc[3] == db[1] && dsa[0] == da[0] && dsb[0] == da[0] &&
                  dsa[1] == da[2] * (tk / mixpert::kScaleTile) && dsb[1] == dsa[1] &&
                  dsa[2] == (da[1] + align - 1) / align * align && dsb[2] == (db[1] + align - 1) / align * align;
  if (!ok)
    return ffi::Error::InvalidArgument(
        "jaxemu mixpert: expected A (L, M, K/128, Sa, 128), B (L, N, K/128, Sb, 128), scale_a (L, K/32, Mp), "
        "scale_b (L, K/32, Np) (rows rounded up to 4), C (splits, L, M, N); got " + shape_str(da) + ", " +
        shape_str(db) + ", " + shape_str(dsa) + ", " + shape_str(dsb) + ", " + shape_str(dc));
  mixpert::Problem p;
  p.a = static_cast<const int8_t*>(a.untyped_data());
  p.b = static_cast<const int8_t*>(b.untyped_data());
  p.scale_a = static_cast<const float*>(scale_a.untyped_data());
  p.scale_b = static_cast<const float*>(scale_b.untyped_data());
  p.c = static_cast<float*>(c->untyped_data());
  p.batch = da[0];
  p.m = da[1];
  p.n = db[1];
  p.k = da[2] * tk;
  p.sa = int(da[3]);
  p.sb = int(db[3]);
  p.splits = int(dc[0]);
  p.warpgroups = int(warpgroups);
  if (p.m == 0 || p.n == 0 || p.batch == 0) return ffi::Error::Success();
  std::string why = mixpert::check(p);
  if (!why.empty()) return ffi::Error::InvalidArgument("jaxemu mixpert: " + why);
  why = mixpert::run(p, stream);
  if (!why.empty()) return ffi::Error::Internal("jaxemu mixpert: " + why);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(kMixpert, MixpertImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()   // a: (L, M, K/128, Sa, 128) int8
                           .Arg<ffi::AnyBuffer>()   // b: (L, N, K/128, Sb, 128) int8
                           .Arg<ffi::AnyBuffer>()   // scale_a: (L, K/32, Mp) float32
                           .Arg<ffi::AnyBuffer>()   // scale_b: (L, K/32, Np) float32
                           .Ret<ffi::AnyBuffer>()   // c: (splits, L, M, N) float32
                           .Attr<int32_t>("warpgroups"));

// The MixPert split (mixpert/params.h: SplitProblem): x (L, R, K) float32,
// or (L, K, R) with columns = 1 -> slices (L, R, K/128, S, 128) int8,
// exponents and fallback flags (L, R, K/32) (columns: (L, K/32, R)) int32
// and uint8.
ffi::Error MixpertSplitImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> slices,
                            ffi::Result<ffi::AnyBuffer> exps, ffi::Result<ffi::AnyBuffer> ok, int64_t columns,
                            int64_t max_spread) {
  auto dx = x.dimensions(), ds = slices->dimensions(), de = exps->dimensions(), dk = ok->dimensions();
  if (x.element_type() != ffi::DataType::F32 || slices->element_type() != ffi::DataType::S8 ||
      exps->element_type() != ffi::DataType::S32 || ok->element_type() != ffi::DataType::U8)
    return ffi::Error::InvalidArgument(
        "jaxemu mixpert split: x must be float32, slices int8, exponents int32, flags uint8");
  constexpr int64_t tk = mixpert::kTileK, tiles = mixpert::kTileK / mixpert::kScaleTile;
  bool good = dx.size() == 3 && ds.size() == 5 && de.size() == 3 && dk.size() == 3 && (columns == 0 || columns == 1);
  int64_t rows = 0, k = 0;
  if (good) {
    rows = columns ? dx[2] : dx[1];
    k = columns ? dx[1] : dx[2];
    const int64_t e1 = columns ? k / tk * tiles : rows, e2 = columns ? rows : k / tk * tiles;
    good = k % tk == 0 && ds[0] == dx[0] && ds[1] == rows && ds[2] == k / tk && ds[4] == tk && de[0] == dx[0] &&
           de[1] == e1 && de[2] == e2 && dk[0] == de[0] && dk[1] == de[1] && dk[2] == de[2];
  }
  if (!good)
    return ffi::Error::InvalidArgument(
        "jaxemu mixpert split: expected x (L, R, K) (columns: (L, K, R)) with K a multiple of 128, slices (L, R, "
        "K/128, S, 128), exponents and flags (L, R, K/32) (columns: (L, K/32, R)); got " + shape_str(dx) + ", " +
        shape_str(ds) + ", " + shape_str(de) + ", " + shape_str(dk));
  mixpert::SplitProblem p;
  p.x = static_cast<const float*>(x.untyped_data());
  p.slices = static_cast<int8_t*>(slices->untyped_data());
  p.exps = static_cast<int32_t*>(exps->untyped_data());
  p.ok = static_cast<uint8_t*>(ok->untyped_data());
  p.batch = dx[0];
  p.rows = rows;
  p.k = k;
  p.s = int(ds[3]);
  p.max_spread = int(max_spread);
  p.columns = columns != 0;
  std::string why = mixpert::check(p);
  if (!why.empty()) return ffi::Error::InvalidArgument("jaxemu mixpert split: " + why);
  why = mixpert::run(p, stream);
  if (!why.empty()) return ffi::Error::Internal("jaxemu mixpert split: " + why);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(kMixpertSplit, MixpertSplitImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()   // x: (L, R, K) or (L, K, R) float32
                           .Ret<ffi::AnyBuffer>()   // slices: (L, R, K/128, S, 128) int8
                           .Ret<ffi::AnyBuffer>()   // exps: (L, R, K/32) or (L, K/32, R) int32
                           .Ret<ffi::AnyBuffer>()   // ok: as exps, uint8
                           .Attr<int64_t>("columns")
                           .Attr<int64_t>("max_spread"));

// MixPert's float fallback (mixpert/params.h: FallbackProblem), in place:
// c (L, M, N) float32 (aliased to the result), a (L, M, K) and b (L, K, N)
// float32, A's flags (L, M, K/32) and B's transposed flags (L, N, K/32)
// uint8; where rows_tiles (columns_tiles) is set, A's flags transposed
// (L, K/32, Mp) (B's flags (L, K/32, Np)) uint8, padded with 1 to a multiple
// of 16, else any uint8 array (unread) -> c plus the fallback tiles'
// products, and work: int32 scratch of L (M + N) + 2 elements where either
// side goes tile by tile (else any int32 array, unused).
ffi::Error MixpertFallbackImpl(cudaStream_t stream, ffi::AnyBuffer c_in, ffi::AnyBuffer a, ffi::AnyBuffer b,
                               ffi::AnyBuffer ok_a, ffi::AnyBuffer ok_bt, ffi::AnyBuffer ok_at, ffi::AnyBuffer ok_b,
                               ffi::Result<ffi::AnyBuffer> c, ffi::Result<ffi::AnyBuffer> work, int64_t rows_tiles,
                               int64_t columns_tiles) {
  auto dci = c_in.dimensions(), da = a.dimensions(), db = b.dimensions(), dfa = ok_a.dimensions(),
       dfb = ok_bt.dimensions(), dc = c->dimensions();
  if (c_in.element_type() != ffi::DataType::F32 || a.element_type() != ffi::DataType::F32 ||
      b.element_type() != ffi::DataType::F32 || c->element_type() != ffi::DataType::F32 ||
      ok_a.element_type() != ffi::DataType::U8 || ok_bt.element_type() != ffi::DataType::U8)
    return ffi::Error::InvalidArgument("jaxemu mixpert fallback: C, A and B must be float32, the flags uint8");
  constexpr int64_t tile = mixpert::kScaleTile;
  const bool ok = dci.size() == 3 && da.size() == 3 && db.size() == 3 && dfa.size() == 3 && dfb.size() == 3 &&
                  dc.size() == 3 && db[0] == da[0] && db[1] == da[2] && dci[0] == da[0] && dci[1] == da[1] &&
                  dci[2] == db[2] && dc[0] == dci[0] && dc[1] == dci[1] && dc[2] == dci[2] && da[2] % tile == 0 &&
                  dfa[0] == da[0] && dfa[1] == da[1] && dfa[2] == da[2] / tile && dfb[0] == da[0] &&
                  dfb[1] == db[2] && dfb[2] == da[2] / tile;
  if (!ok)
    return ffi::Error::InvalidArgument(
        "jaxemu mixpert fallback: expected C (L, M, N), A (L, M, K), B (L, K, N), A's flags (L, M, K/32), B's "
        "transposed flags (L, N, K/32); got " + shape_str(dci) + ", " + shape_str(da) + ", " + shape_str(db) + ", " +
        shape_str(dfa) + ", " + shape_str(dfb));
  auto transposed_ok = [&](ffi::AnyBuffer f, int64_t lines) {
    auto d = f.dimensions();
    return f.element_type() == ffi::DataType::U8 && d.size() == 3 && d[0] == da[0] && d[1] == da[2] / tile &&
           d[2] == mixpert::padded_flags(lines);
  };
  if (rows_tiles && !transposed_ok(ok_at, da[1]))
    return ffi::Error::InvalidArgument("jaxemu mixpert fallback: expected A's transposed flags (L, K/32, Mp) uint8, "
                                       "Mp = M rounded up to 16; got " + shape_str(ok_at.dimensions()));
  if (columns_tiles && !transposed_ok(ok_b, db[2]))
    return ffi::Error::InvalidArgument("jaxemu mixpert fallback: expected B's flags (L, K/32, Np) uint8, "
                                       "Np = N rounded up to 16; got " + shape_str(ok_b.dimensions()));
  if ((rows_tiles || columns_tiles) &&
      (work->element_type() != ffi::DataType::S32 || int64_t(work->element_count()) < da[0] * (da[1] + db[2]) + 2))
    return ffi::Error::InvalidArgument("jaxemu mixpert fallback: expected an int32 work buffer of L (M + N) + 2 "
                                       "elements where a side goes tile by tile");
  mixpert::FallbackProblem p;
  p.c = static_cast<float*>(c->untyped_data());
  if (rows_tiles || columns_tiles) p.work = static_cast<int32_t*>(work->untyped_data());
  p.a = static_cast<const float*>(a.untyped_data());
  p.b = static_cast<const float*>(b.untyped_data());
  p.ok_a = static_cast<const uint8_t*>(ok_a.untyped_data());
  p.ok_bt = static_cast<const uint8_t*>(ok_bt.untyped_data());
  p.rows_tiles = rows_tiles != 0;
  p.columns_tiles = columns_tiles != 0;
  if (p.rows_tiles) p.ok_at = static_cast<const uint8_t*>(ok_at.untyped_data());
  if (p.columns_tiles) p.ok_b = static_cast<const uint8_t*>(ok_b.untyped_data());
  p.batch = da[0];
  p.m = da[1];
  p.n = db[2];
  p.k = da[2];
  std::string why = mixpert::check(p);
  if (!why.empty()) return ffi::Error::InvalidArgument("jaxemu mixpert fallback: " + why);
  if (c_in.untyped_data() != c->untyped_data()) {  // (the caller aliases them; a copy where XLA did not)
    cudaError_t e = cudaMemcpyAsync(c->untyped_data(), c_in.untyped_data(), c_in.size_bytes(),
                                    cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess) return ffi::Error::Internal(std::string("jaxemu mixpert fallback: ") + cudaGetErrorString(e));
  }
  why = mixpert::run(p, stream);
  if (!why.empty()) return ffi::Error::Internal("jaxemu mixpert fallback: " + why);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(kMixpertFallback, MixpertFallbackImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Arg<ffi::AnyBuffer>()   // c: (L, M, N) float32, aliased to the result
                           .Arg<ffi::AnyBuffer>()   // a: (L, M, K) float32
                           .Arg<ffi::AnyBuffer>()   // b: (L, K, N) float32
                           .Arg<ffi::AnyBuffer>()   // ok_a: (L, M, K/32) uint8
                           .Arg<ffi::AnyBuffer>()   // ok_bt: (L, N, K/32) uint8
                           .Arg<ffi::AnyBuffer>()   // ok_at: (L, K/32, Mp) uint8 (read where rows_tiles)
                           .Arg<ffi::AnyBuffer>()   // ok_b: (L, K/32, Np) uint8 (read where columns_tiles)
                           .Ret<ffi::AnyBuffer>()   // c: (L, M, N) float32
                           .Ret<ffi::AnyBuffer>()   // work: (L (M + N) + 2,) int32 scratch (either side's tiles)
                           .Attr<int64_t>("rows_tiles")
                           .Attr<int64_t>("columns_tiles"));

template <typename T>
nb::capsule capsule(T* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}

}  // namespace
}  // namespace jaxemu

NB_MODULE(_jaxemu_cuda, m) {
  using namespace jaxemu;
  m.doc() = "jaxemu CUDA kernels (XLA FFI handlers)";
  m.def("registrations", []() {
    nb::dict d;
    d["jaxemu_fused_bf16"] = capsule(kFusedBF16);
    d["jaxemu_fused_fp16"] = capsule(kFusedFP16);
    d["jaxemu_fused_tf32"] = capsule(kFusedTF32);
    d["jaxemu_fused_split"] = capsule(kFusedSplit);
    d["jaxemu_fused_bf16_gated"] = capsule(kFusedBF16Gated);
    d["jaxemu_fused_fp16_gated"] = capsule(kFusedFP16Gated);
    d["jaxemu_fused_tf32_gated"] = capsule(kFusedTF32Gated);
    d["jaxemu_fused_split_gated"] = capsule(kFusedSplitGated);
    d["jaxemu_fp32_gated"] = capsule(kFp32Gated);
    d["jaxemu_fused_split_stats"] = capsule(kFusedSplitStats);
    d["jaxemu_fused_f32"] = capsule(kFusedF32);
    d["jaxemu_int8_gemm"] = capsule(kInt8Gemm);
    d["jaxemu_int8_gemm_residues"] = capsule(kInt8GemmResidues);
    d["jaxemu_ozaki2_residues"] = capsule(kOzakiResidues);
    d["jaxemu_ozaki2_crt"] = capsule(kOzakiCrt);
    d["jaxemu_mixpert"] = capsule(kMixpert);
    d["jaxemu_mixpert_split"] = capsule(kMixpertSplit);
    d["jaxemu_mixpert_fallback"] = capsule(kMixpertFallback);
    d["jaxemu_row_stats"] = capsule(kRowStats);
    d["jaxemu_col_stats"] = capsule(kColStats);
    return d;
  });
  m.def("supported_families", []() { return std::vector<std::string>{"fused", "int8", "mixpert"}; });
  m.def("fused_tile_k", [](const std::string& fmt) {
    return fused::tile_k(fmt == "tf32" ? fused::SliceType::kTF32 : fmt == "fp16" ? fused::SliceType::kFP16 : fused::SliceType::kBF16);
  });
  m.def("mixpert_limits", []() {
    return std::vector<int64_t>{mixpert::kTileK, mixpert::kScaleTile, mixpert::kScaleAlign};
  });
  m.def("int8_limits", []() {
    return std::vector<int64_t>{int8::kMaxExactK, int8::kAlignK, int8::kAlignN, int8::kMaxModuli};
  });
  // nmod > 0: the residue output (jaxemu_int8_gemm_residues) with nmod moduli.
  m.def("int8_workspace_bytes", [](int64_t batch, int64_t m, int64_t n, int64_t k, int device, int nmod) {
    int8::GemmProblem p;
    p.batch = batch;
    p.m = m;
    p.n = n;
    p.k = k;
    p.nmod = nmod;
    const int sms = int8::sm_count(device);
    return int64_t(int8::workspace_size(int8::choose(p, sms), p, sms));
  });
  m.def("device_supported", [](int device) {
    std::string why;
    bool ok = device_supported(device, &why);
    return std::make_pair(ok, why);
  });
}
