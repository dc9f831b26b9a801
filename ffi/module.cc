// The nanobind module jaxemu._jaxemu_cuda: XLA FFI handlers for the CUDA
// kernels, exported as capsules by registrations() (jax/examples/ffi style),
// plus the few facts the Python side needs to decide what it can run.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "gemm.h"
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

// D = alpha * A @ B^T (+ beta * C when accumulate): A (L, M, K), B (L, N, K) of
// the slice dtype, C/D (L, M, N) float32 (C aliased to D by the caller).
template <SliceType kType, ffi::DataType kDtype, bool kAccumulate>
ffi::Error GemmImpl(cudaStream_t stream, ffi::ScratchAllocator scratch, ffi::AnyBuffer a, ffi::AnyBuffer b,
                    ffi::RemainingArgs rest, ffi::Result<ffi::AnyBuffer> d, int64_t promote_k, float alpha,
                    float beta) {
  auto da = a.dimensions(), db = b.dimensions(), dd = d->dimensions();
  if (a.element_type() != kDtype || b.element_type() != kDtype)
    return ffi::Error::InvalidArgument("jaxemu gemm: operand dtype does not match the target");
  if (d->element_type() != ffi::DataType::F32) return ffi::Error::InvalidArgument("jaxemu gemm: output must be float32");
  if (da.size() != 3 || db.size() != 3 || dd.size() != 3 || da[0] != db[0] || da[2] != db[2] || dd[0] != da[0] ||
      dd[1] != da[1] || dd[2] != db[1])
    return ffi::Error::InvalidArgument("jaxemu gemm: expected A (L, M, K), B (L, N, K), D (L, M, N); got " +
                                       shape_str(da) + ", " + shape_str(db) + ", " + shape_str(dd));
  GemmProblem p;
  p.a = a.untyped_data();
  p.b = b.untyped_data();
  p.d = static_cast<float*>(d->untyped_data());
  p.batch = da[0];
  p.m = da[1];
  p.k = da[2];
  p.n = db[1];
  p.promote_k = promote_k;
  p.alpha = alpha;
  p.beta = 0.0f;
  if (kAccumulate) {
    if (rest.size() != 1) return ffi::Error::InvalidArgument("jaxemu gemm_acc: expected a C operand");
    auto c = rest.get<ffi::AnyBuffer>(0);
    if (!c.has_value()) return ffi::Error::InvalidArgument("jaxemu gemm_acc: bad C operand");
    auto dc = c->dimensions();
    if (c->element_type() != ffi::DataType::F32 || dc.size() != 3 || dc[0] != dd[0] || dc[1] != dd[1] ||
        dc[2] != dd[2])
      return ffi::Error::InvalidArgument("jaxemu gemm_acc: C must be float32 of D's shape " + shape_str(dd));
    p.c = static_cast<const float*>(c->untyped_data());
    p.beta = beta;
  }
  if (p.m == 0 || p.n == 0 || p.batch == 0) return ffi::Error::Success();
  if (p.k == 0) return ffi::Error::InvalidArgument("jaxemu gemm: K = 0 must be handled by the caller");
  std::string why = gemm_check(kType, p);
  if (!why.empty()) return ffi::Error::InvalidArgument("jaxemu gemm: " + why);
  size_t ws_bytes = gemm_workspace_bytes(kType, p);
  void* ws = nullptr;
  if (ws_bytes > 0) {
    auto mem = scratch.Allocate(ws_bytes, 256);
    if (!mem.has_value()) return ffi::Error(ffi::ErrorCode::kResourceExhausted, "jaxemu gemm: no scratch memory");
    ws = *mem;
  }
  why = gemm_run(kType, p, ws, ws_bytes, stream);
  if (!why.empty()) return ffi::Error::Internal("jaxemu gemm: " + why);
  return ffi::Error::Success();
}

#define JAXEMU_GEMM_HANDLER(name, kind, dtype, acc)                                                   \
  XLA_FFI_DEFINE_HANDLER(name, (GemmImpl<SliceType::kind, ffi::DataType::dtype, acc>),               \
                         ffi::Ffi::Bind()                                                             \
                             .Ctx<ffi::PlatformStream<cudaStream_t>>()                                \
                             .Ctx<ffi::ScratchAllocator>()                                            \
                             .Arg<ffi::AnyBuffer>()  /* a: (L, M, K) slices */                        \
                             .Arg<ffi::AnyBuffer>()  /* b: (L, N, K) slices */                        \
                             .RemainingArgs()        /* c: (L, M, N) f32, accumulate only */          \
                             .Ret<ffi::AnyBuffer>()  /* d: (L, M, N) f32 */                           \
                             .Attr<int64_t>("promote_k")                                              \
                             .Attr<float>("alpha")                                                    \
                             .Attr<float>("beta"));

JAXEMU_GEMM_HANDLER(kGemmBF16, kBF16, BF16, false)
JAXEMU_GEMM_HANDLER(kGemmFP16, kFP16, F16, false)
JAXEMU_GEMM_HANDLER(kGemmTF32, kTF32, F32, false)
JAXEMU_GEMM_HANDLER(kGemmAccBF16, kBF16, BF16, true)
JAXEMU_GEMM_HANDLER(kGemmAccFP16, kFP16, F16, true)
JAXEMU_GEMM_HANDLER(kGemmAccTF32, kTF32, F32, true)

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
    d["jaxemu_gemm_bf16"] = capsule(kGemmBF16);
    d["jaxemu_gemm_fp16"] = capsule(kGemmFP16);
    d["jaxemu_gemm_tf32"] = capsule(kGemmTF32);
    d["jaxemu_gemm_acc_bf16"] = capsule(kGemmAccBF16);
    d["jaxemu_gemm_acc_fp16"] = capsule(kGemmAccFP16);
    d["jaxemu_gemm_acc_tf32"] = capsule(kGemmAccTF32);
    return d;
  });
  m.def("supported_families", []() { return std::vector<std::string>{"float"}; });
  m.def("tile_k", [](const std::string& fmt) {
    if (fmt == "tf32") return gemm_tile_k(SliceType::kTF32);
    if (fmt == "fp16") return gemm_tile_k(SliceType::kFP16);
    return gemm_tile_k(SliceType::kBF16);
  });
  m.def("device_supported", [](int device) {
    std::string why;
    bool ok = device_supported(device, &why);
    return std::make_pair(ok, why);
  });
}
