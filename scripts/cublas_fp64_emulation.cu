// cuBLAS's own FP64 emulation (fixed-point, on the int8 tensor cores) against
// native DGEMM at n^3 on the same GPU (issue 14: ozaki2_f64 must beat it).
// Build and run on the GPU machine (CUDA 13's cuBLAS):
//   nvcc -O2 -std=c++17 -o /tmp/cublas_fp64 scripts/cublas_fp64_emulation.cu -lcublas && /tmp/cublas_fp64 8192
// Prints the median time of 5 runs of each, and the emulated result's largest
// relative difference from native DGEMM's (a sanity check, not an error measure).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define CHECK(x)                                                                      \
  do {                                                                                \
    auto s_ = (x);                                                                    \
    if (s_ != 0) {                                                                    \
      std::fprintf(stderr, "%s failed: %d (line %d)\n", #x, int(s_), __LINE__);      \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

static float median_ms(cublasHandle_t h, int n, const double* a, const double* b, double* c) {
  const double one = 1.0, zero = 0.0;
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));  // warm-up
  std::vector<float> t;
  for (int r = 0; r < 5; ++r) {
    CHECK(cudaEventRecord(e0));
    CHECK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 8192;
  const size_t count = size_t(n) * n;
  std::vector<double> host(count);
  std::mt19937_64 rng(0);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (auto& x : host) x = u(rng);
  double *a, *b, *c_native, *c_emulated;
  CHECK(cudaMalloc(&a, count * 8));
  CHECK(cudaMalloc(&b, count * 8));
  CHECK(cudaMalloc(&c_native, count * 8));
  CHECK(cudaMalloc(&c_emulated, count * 8));
  CHECK(cudaMemcpy(a, host.data(), count * 8, cudaMemcpyHostToDevice));
  for (auto& x : host) x = u(rng);
  CHECK(cudaMemcpy(b, host.data(), count * 8, cudaMemcpyHostToDevice));
  cublasHandle_t h;
  CHECK(cublasCreate(&h));
  const float native = median_ms(h, n, a, b, c_native);
  CHECK(cublasSetMathMode(h, CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH));
  CHECK(cublasSetEmulationStrategy(h, CUBLAS_EMULATION_STRATEGY_EAGER));
  const float emulated = median_ms(h, n, a, b, c_emulated);
  std::vector<double> x(count), y(count);
  CHECK(cudaMemcpy(x.data(), c_native, count * 8, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(y.data(), c_emulated, count * 8, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (size_t i = 0; i < count; ++i) worst = std::max(worst, std::fabs(x[i] - y[i]) / std::max(std::fabs(x[i]), 1e-300));
  int version = 0;
  CHECK(cublasGetVersion(h, &version));
  std::printf("cuBLAS %d, n = %d: native DGEMM %.2f ms, FP64 emulation (fixed point, eager) %.2f ms (%.2fx DGEMM); "
              "largest relative difference %.2e\n", version, n, native, emulated, native / emulated, worst);
  return 0;
}
