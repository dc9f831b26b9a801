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

// One thread per output element (grid-stride), crt_element in ffi/int8/crt.cuh.
template <bool kFloat64>
__global__ void __launch_bounds__(256) crt_kernel(const CrtProblem p) {
  const int64_t total = p.batch * p.m * p.n;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (kFloat64) p.c64[idx] = crt_element64(p, idx, total);
    else p.c[idx] = crt_element(p, idx, total);
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
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.batch > INT32_MAX) return "dimension too large";
  if (p.k > kMaxExactK)
    return "K = " + std::to_string(p.k) + " exceeds " + std::to_string(kMaxExactK) +
           ", beyond which int32 sums of int8 products can overflow (the caller cuts K)";
  if (p.k % kAlignK) return "K must be a multiple of 16 (zero-padded by the caller)";
  if (p.n % kAlignN) return "N must be a multiple of 4 (zero-padded by the caller)";
  if (!aligned16(p.a) || !aligned16(p.b) || !aligned16(p.c)) return "operand pointers must be 16-byte aligned";
  return "";
}

GemmConfig choose(const GemmProblem& p, int sms) {
  // Wide tiles when they give every multiprocessor at least one tile;
  // otherwise stream-K spreads the K loop of the few tiles over the GPU.
  const int64_t wide_tiles = ((p.m + 127) / 128) * ((p.n + 255) / 256) * p.batch;
  return wide_tiles >= sms ? GemmConfig::kWide : GemmConfig::kStreamK;
}

size_t workspace_size(GemmConfig cfg, const GemmProblem& p, int sms) {
  return cfg == GemmConfig::kWide ? workspace_wide(p, sms) : workspace_streamk(p, sms);
}

std::string run(GemmConfig cfg, const GemmProblem& p, int sms, void* workspace, cudaStream_t stream) {
  std::string why = check(p);
  if (!why.empty()) return why;
  return cfg == GemmConfig::kWide ? run_wide(p, sms, workspace, stream) : run_streamk(p, sms, workspace, stream);
}

std::string check(const CrtProblem& p) {
  if (p.nmod < 1 || p.nmod > kMaxModuli) return "bad number of moduli";
  if (!p.p || !p.row_exp || !p.col_exp || (!p.c == !p.c64)) return "missing buffer (or both outputs given)";
  return "";
}

std::string run(const CrtProblem& p, cudaStream_t stream) {
  std::string why = check(p);
  if (!why.empty()) return why;
  const int64_t total = p.batch * p.m * p.n;
  if (total == 0) return "";
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, int64_t(sm_count()) * 16);
  if (p.c64) crt_kernel<true><<<int(blocks), threads, 0, stream>>>(p);
  else crt_kernel<false><<<int(blocks), threads, 0, stream>>>(p);
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
