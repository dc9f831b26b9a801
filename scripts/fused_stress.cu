// Does the fused fp16x3 GEMM ever stop returning? (docs/performance.md, stop
// 32: a benchmark process on one H200 waited > 140 s on its first fused call
// at 8192^3 and at 1M x 256 x 1024, reproducibly on that machine, after
// running cuBLAS SGEMM; a fresh machine ran the same product in
// milliseconds; a review of the pipeline's protocol, with a host model of
// random interleavings, found no way for it to hang.) This runs cuBLAS SGEMM,
// then rounds of the fused kernel at those shapes and kNN's, an SGEMM between
// every fourth round, and stops with "HANG" if any call is not done in 30 s.
//
//   nvcc -std=c++17 -arch=sm_90a -O3 --expt-relaxed-constexpr -Iffi -I.cutlass/include \
//     -I.cutlass/tools/util/include scripts/fused_stress.cu -o /tmp/fused_stress -lcublas
//   /tmp/fused_stress 200          # rounds
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include <cublas_v2.h>

#include "fused/launch.cuh"

using namespace jaxemu::fused;
using FP16x3 = Traits<cutlass::half_t, 128, 2, 2, 2, 1, 2>;  // ffi/fused/generate.py: fp16, 2 slices, (1, 2) terms

static void* device_buffer(size_t bytes, int byte) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    std::printf("cudaMalloc of %zu bytes failed\n", bytes);
    std::exit(2);
  }
  cudaMemset(p, byte, bytes);
  return p;
}

// Wait for the stream; "HANG" and exit if it takes more than 30 s.
static void wait_for(const char* what, int call) {
  const auto t0 = std::chrono::steady_clock::now();
  cudaError_t e;
  while ((e = cudaStreamQuery(0)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(30)) {
      std::printf("HANG in %s, call %d\n", what, call);
      std::fflush(stdout);
      _exit(1);
    }
  }
  if (e != cudaSuccess) {
    std::printf("CUDA error in %s, call %d: %s\n", what, call, cudaGetErrorString(e));
    _exit(2);
  }
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 100;
  cublasHandle_t handle;
  cublasCreate(&handle);
  const int S = 8192;
  float* x = static_cast<float*>(device_buffer(4l * S * S, 0));
  float* y = static_cast<float*>(device_buffer(4l * S * S, 0));
  float* z = static_cast<float*>(device_buffer(4l * S * S, 0));
  const float one = 1, zero = 0;
  auto sgemm = [&] { cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, S, S, S, &one, x, S, y, S, &zero, z, S); };
  for (int i = 0; i < 5; ++i) sgemm();
  wait_for("sgemm", 0);
  const long shapes[3][3] = {{8192, 8192, 8192}, {1048576, 1024, 256}, {8192, 262144, 128}};  // M, N, K
  void* buf[3][5] = {};
  for (int j = 0; j < 3; ++j) {
    const long M = shapes[j][0], N = shapes[j][1], K = shapes[j][2];
    buf[j][0] = device_buffer(M * K * 4, 0x3c);  // two fp16 slices per value: 0x3c3c, ~1.06
    buf[j][1] = device_buffer(N * K * 4, 0x3c);
    buf[j][2] = device_buffer(M * N * 4, 0);
    buf[j][3] = device_buffer(M * 4, 0);  // row and column exponents: 0
    buf[j][4] = device_buffer(N * 4, 0);
  }
  for (int r = 0; r < rounds; ++r)
    for (int j = 0; j < 3; ++j) {
      const long M = shapes[j][0], N = shapes[j][1], K = shapes[j][2];
      Problem p;
      p.a = buf[j][0];
      p.b = buf[j][1];
      p.c = static_cast<float*>(buf[j][2]);
      p.row_exp = static_cast<int32_t*>(buf[j][3]);
      p.col_exp = static_cast<int32_t*>(buf[j][4]);
      p.m = M, p.n = N, p.k = K, p.sa = p.sb = 2, p.nterms = 3;
      const int ta[3] = {1, 0, 0}, tb[3] = {0, 1, 0}, te[3] = {-11, -11, 0}, k_tiles = int(K / 64);
      for (int t = 0; t < 3; ++t) {  // the corrections first, then hi*hi; promotions every 8 K-tiles
        p.term_a[t] = ta[t], p.term_b[t] = tb[t], p.term_exp[t] = te[t];
        p.kc_tiles[t] = t < 2 ? (k_tiles < 8 ? k_tiles : 8) : 1;
      }
      if (r % 4 == 3) sgemm();
      const std::string why = launch<FP16x3>(p, 0);
      if (!why.empty()) {
        std::printf("launch: %s\n", why.c_str());
        return 3;
      }
      wait_for("fused", r * 3 + j);
    }
  std::printf("OK: %d rounds of 3 shapes\n", rounds);
  return 0;
}
