// Checks, launch heuristic and dispatch of the int8 kernels (ffi/int8.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "int8.h"
#include "int8/crt.cuh"

namespace jaxemu {
namespace int8 {

size_t workspace_wide(const GemmProblem&, int);
std::string run_wide(const GemmProblem&, int, void*, cudaStream_t);
size_t workspace_streamk(const GemmProblem&, int);
std::string run_streamk(const GemmProblem&, int, void*, cudaStream_t);

// One thread per output element (grid-stride), crt_element in ffi/int8/crt.cuh.
__global__ void __launch_bounds__(256) crt_kernel(const CrtProblem p) {
  const int64_t total = p.batch * p.m * p.n;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x)
    p.c[idx] = crt_element(p, idx, total);
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
  if (!p.p || !p.row_exp || !p.col_exp || !p.c) return "missing buffer";
  return "";
}

std::string run(const CrtProblem& p, cudaStream_t stream) {
  std::string why = check(p);
  if (!why.empty()) return why;
  const int64_t total = p.batch * p.m * p.n;
  if (total == 0) return "";
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, int64_t(sm_count()) * 16);
  crt_kernel<<<int(blocks), threads, 0, stream>>>(p);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("CRT kernel launch: ") + cudaGetErrorString(e);
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
