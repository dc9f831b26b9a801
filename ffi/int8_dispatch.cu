// Checks, launch heuristic and dispatch of the int8 kernels (ffi/int8.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "int8.h"
#include "int8/crt.cuh"
#include "int8/residues.cuh"

namespace jaxemu {
namespace int8 {

size_t workspace_wide(const GemmProblem&, int);
std::string run_wide(const GemmProblem&, int, void*, cudaStream_t);
size_t workspace_streamk(const GemmProblem&, int);
std::string run_streamk(const GemmProblem&, int, void*, cudaStream_t);
size_t workspace_wide_residues(const GemmProblem&, int);
std::string run_wide_residues(const GemmProblem&, int, void*, cudaStream_t);
size_t workspace_streamk_residues(const GemmProblem&, int);
std::string run_streamk_residues(const GemmProblem&, int, void*, cudaStream_t);

// One thread per output element (grid-stride), crt_element in
// ffi/int8/crt.cuh: outputs whose rows are not whole 16-byte vectors.
template <bool kFloat64>
__global__ void __launch_bounds__(256) crt_kernel(const CrtProblem p) {
  const int64_t total = p.batch * p.m * p.n;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (kFloat64) p.c64[idx] = crt_element64(p, idx, total);
    else p.c[idx] = crt_element(p, idx, total);
  }
}

// kVec consecutive elements of a row per thread (grid-stride), kN = nmod
// moduli known at compile time: the thread issues its kN vector loads of raw
// products before any arithmetic, so that each multiprocessor keeps enough
// bytes in flight for memory speed; one index division and one row exponent
// per kVec elements. Same digits and values as crt_element, element by
// element. In: int32_t (raw products, p.p) or uint8_t (residues, p.r).
template <class T, int kV>
struct alignas(sizeof(T) * kV) Pack {
  T v[kV];
};

template <bool kFloat64, int kN, int kVec, class In>
__global__ void __launch_bounds__(256) crt_vec_kernel(const CrtProblem p) {
  const int64_t total = p.batch * p.m * p.n, groups = total / kVec;  // n % kVec == 0
  const In* in;
  if constexpr (sizeof(In) == 1) in = p.r;
  else in = p.p;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += int64_t(gridDim.x) * blockDim.x) {
    const int64_t idx = kVec * g;
    Pack<In, kVec> raw_v[kN];
#pragma unroll
    for (int l = 0; l < kN; ++l) raw_v[l] = *reinterpret_cast<const Pack<In, kVec>*>(in + int64_t(l) * total + idx);
    const CrtPosition at = crt_position(p, idx, total);
    const int row_e = p.row_exp[at.b * p.m + at.row];
    const Pack<int32_t, kVec> col_e = *reinterpret_cast<const Pack<int32_t, kVec>*>(p.col_exp + at.b * p.n + at.col);
    Pack<float, kVec> f;
    Pack<double, kVec> d;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      In raw[kN];
      int digit[kN];
#pragma unroll
      for (int l = 0; l < kN; ++l) raw[l] = raw_v[l].v[e];
      crt_digits(p, kN, raw, digit);
      const int scale = -(row_e + col_e.v[e]);
      if constexpr (kFloat64) d.v[e] = crt_value64(p, kN, digit, scale);
      else f.v[e] = crt_value(p, kN, digit, scale);
    }
    if constexpr (kFloat64) {
#pragma unroll
      for (int h = 0; h < kVec; h += 2)  // 16-byte stores
        *reinterpret_cast<Pack<double, 2>*>(p.c64 + idx + h) = Pack<double, 2>{{d.v[h], d.v[h + 1]}};
    } else {
      *reinterpret_cast<Pack<float, kVec>*>(p.c + idx) = f;
    }
  }
}

// crt_vec_kernel<kFloat64, p.nmod, kVec>: four elements per thread, two past
// 12 moduli (8 for float64's 192-bit sums), where four would spill registers.
template <bool kFloat64, class In, int kN = 1>
void launch_crt_vec(const CrtProblem& p, cudaStream_t stream) {
  if constexpr (kN <= kMaxModuli) {
    if (p.nmod != kN) return launch_crt_vec<kFloat64, In, kN + 1>(p, stream);
    constexpr int kVec = kN <= (kFloat64 ? 8 : 12) ? 4 : 2;
    const int64_t groups = p.batch * p.m * p.n / kVec;
    const int blocks = int(std::min<int64_t>((groups + 255) / 256, int64_t(sm_count()) * 8));
    crt_vec_kernel<kFloat64, kN, kVec, In><<<blocks, 256, 0, stream>>>(p);
  }
}

// Residues of a (batch, rows, k) operand: one thread per 4 values of a row
// (grid-stride), rows_task in ffi/int8/residues.cuh.
template <class T>
__global__ void __launch_bounds__(256) residues_rows_kernel(const ResidueProblem p) {
  const int64_t tasks = p.batch * p.rows_out * (p.k_out / 4);
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < tasks; t += int64_t(gridDim.x) * blockDim.x)
    rows_task<T>(p, t);
}

// Residues of a transposed (batch, k, rows) operand (B of A B): staged
// through a shared-memory tile (ffi/common/tiles.cuh), 16 consecutive k of
// one output row per thread (16-byte stores per modulus).
template <class T>
__global__ void __launch_bounds__(kTileThreads, 2) residues_transposed_kernel(const ResidueProblem p) {
  for_each_transposed_tile(static_cast<const T*>(p.x), p.batch, p.k, p.rows, p.k_out, p.rows_out,
                           [&](int64_t b, int64_t r, int64_t k0, const T* col, int64_t stride) {
                             transposed_task<T>(p, b, r, k0, col, stride, 16);
                           });
}

static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

std::string check(const GemmProblem& p) {
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.batch < 1) return "empty problem (the caller handles zero-sized dims)";
  if (p.residues() ? (!p.r || p.c) : (!p.c || p.r))
    return "give one output: int32 products (c), or their residues (r) with the moduli";
  if (p.residues()) {
    if (p.nmod > kMaxModuli || p.batch % p.nmod)
      return "residue output: at most " + std::to_string(kMaxModuli) +
             " moduli, and a batch of whole moduli x entries";
    for (int l = 0; l < p.nmod; ++l)
      if (p.moduli[l].m < 2 || p.moduli[l].m > 256) return "residue output: moduli must lie in 2..256";
    if (p.n % kAlignNResidues) return "N must be a multiple of 16 for residues (zero-padded by the caller)";
  }
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.batch > INT32_MAX) return "dimension too large";
  if (p.k > kMaxExactK)
    return "K = " + std::to_string(p.k) + " exceeds " + std::to_string(kMaxExactK) +
           ", beyond which int32 sums of int8 products can overflow (the caller cuts K)";
  if (p.k % kAlignK) return "K must be a multiple of 16 (zero-padded by the caller)";
  if (p.n % kAlignN) return "N must be a multiple of 4 (zero-padded by the caller)";
  if (!aligned16(p.a) || !aligned16(p.b) || !aligned16(p.c ? static_cast<const void*>(p.c) : p.r))
    return "operand pointers must be 16-byte aligned";
  return "";
}

GemmConfig choose(const GemmProblem& p, int sms) {
  // Wide tiles when they give every multiprocessor at least one tile;
  // otherwise stream-K spreads the K loop of the few tiles over the GPU.
  const int64_t wide_tiles = ((p.m + 127) / 128) * ((p.n + 255) / 256) * p.batch;
  return wide_tiles >= sms ? GemmConfig::kWide : GemmConfig::kStreamK;
}

size_t workspace_size(GemmConfig cfg, const GemmProblem& p, int sms) {
  if (p.residues()) return cfg == GemmConfig::kWide ? workspace_wide_residues(p, sms) : workspace_streamk_residues(p, sms);
  return cfg == GemmConfig::kWide ? workspace_wide(p, sms) : workspace_streamk(p, sms);
}

std::string run(GemmConfig cfg, const GemmProblem& p, int sms, void* workspace, cudaStream_t stream) {
  std::string why = check(p);
  if (!why.empty()) return why;
  if (p.residues())
    return cfg == GemmConfig::kWide ? run_wide_residues(p, sms, workspace, stream)
                                    : run_streamk_residues(p, sms, workspace, stream);
  return cfg == GemmConfig::kWide ? run_wide(p, sms, workspace, stream) : run_streamk(p, sms, workspace, stream);
}

std::string check(const CrtProblem& p) {
  if (p.nmod < 1 || p.nmod > kMaxModuli) return "bad number of moduli";
  if (!p.p == !p.r || !p.row_exp || !p.col_exp || (!p.c == !p.c64))
    return "missing buffer (or both inputs, products and residues, or both outputs given)";
  return "";
}

std::string run(const CrtProblem& p, cudaStream_t stream) {
  std::string why = check(p);
  if (!why.empty()) return why;
  const int64_t total = p.batch * p.m * p.n;
  if (total == 0) return "";
  const int threads = 256;
  void* c = p.c64 ? static_cast<void*>(p.c64) : static_cast<void*>(p.c);
  const void* in = p.r ? static_cast<const void*>(p.r) : p.p;
  if (p.n % 4 == 0 && aligned16(in) && aligned16(p.col_exp) && aligned16(c)) {
    if (p.r) {
      if (p.c64) launch_crt_vec<true, uint8_t>(p, stream);
      else launch_crt_vec<false, uint8_t>(p, stream);
    } else {
      if (p.c64) launch_crt_vec<true, int32_t>(p, stream);
      else launch_crt_vec<false, int32_t>(p, stream);
    }
  } else {
    const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, int64_t(sm_count()) * 16);
    if (p.c64) crt_kernel<true><<<int(blocks), threads, 0, stream>>>(p);
    else crt_kernel<false><<<int(blocks), threads, 0, stream>>>(p);
  }
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("CRT kernel launch: ") + cudaGetErrorString(e);
}

std::string check(const ResidueProblem& p) {
  if (p.nmod < 1 || p.nmod > kMaxResidueModuli) return "bad number of moduli";
  if (p.batch < 0 || p.rows < 0 || p.k < 0 || p.rows_out < p.rows || p.k_out < p.k)
    return "the output must cover the operand (rows_out >= rows, k_out >= k)";
  if (p.k_out % kAlignK) return "k_out must be a multiple of 16";
  if (p.batch * p.rows_out * p.k_out == 0) return "";
  if (!p.out || !aligned16(p.out)) return "the output must be a 16-byte aligned buffer";
  if (p.rows * p.k > 0 && (!p.x || !p.exp)) return "missing operand or exponents";
  return "";
}

std::string run(const ResidueProblem& p, cudaStream_t stream) {
  std::string why = check(p);
  if (!why.empty()) return why;
  if (p.batch * p.rows_out * p.k_out == 0) return "";
  // Enough resident blocks to hide latency (fewer when a test asks).
  const int64_t cap = p.max_blocks > 0 ? p.max_blocks : int64_t(sm_count()) * 16;
  // One row of a transposed operand, (L, K, 1), is laid out as (L, 1, K).
  if (p.transposed && p.rows != 1) {
    const int blocks = int(std::min(transposed_tiles(p.batch, p.k_out, p.rows_out), cap));
    if (p.f64) residues_transposed_kernel<double><<<blocks, kTileThreads, 0, stream>>>(p);
    else residues_transposed_kernel<float><<<blocks, kTileThreads, 0, stream>>>(p);
  } else {
    const int64_t tasks = p.batch * p.rows_out * (p.k_out / 4);
    const int blocks = int(std::min((tasks + 255) / 256, cap));
    if (p.f64) residues_rows_kernel<double><<<blocks, 256, 0, stream>>>(p);
    else residues_rows_kernel<float><<<blocks, 256, 0, stream>>>(p);
  }
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("residue kernel launch: ") + cudaGetErrorString(e);
}

int sm_count() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 132;
  return sm_count(device);
}

int sm_count(int device) {
  static int cache[64] = {};
  if (device >= 0 && device < 64 && cache[device]) return cache[device];
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms < 1) sms = 132;
  if (device >= 0 && device < 64) cache[device] = sms;
  return sms;
}

}  // namespace int8
}  // namespace jaxemu
