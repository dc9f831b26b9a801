// Times tile/cluster variants of the promoted sm90 GEMM (ffi/gemm_sm90.cuh)
// outside JAX, with CUDA events. Build on the GPU machine, e.g.
//   nvcc -std=c++17 -O3 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
//        -I.cutlass/include -I.cutlass/tools/util/include -Iffi -DTILE_N=192 -DCLUSTER_M=2 \
//        scripts/gemm_variants.cu -o /tmp/v
#include <cstdio>
#include <vector>

#include "gemm_sm90.cuh"

using namespace jaxemu;

__global__ void fill(cutlass::bfloat16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = cutlass::bfloat16_t(float(h & 0xffff) / 32768.0f - 1.0f);
  }
}

int main() {
  using G = sm90::PromotedGemm<cutlass::bfloat16_t, 64, TILE_N, CLUSTER_M>;
  const int64_t n = 8192;
  for (int64_t k : {8192L, 49152L}) {
    cutlass::bfloat16_t *a, *b;
    float* d;
    cudaMalloc(&a, n * k * 2);
    cudaMalloc(&b, n * k * 2);
    cudaMalloc(&d, n * n * 4);
    fill<<<1024, 256>>>(a, n * k, 1);
    fill<<<1024, 256>>>(b, n * k, 2);
    for (int64_t promote : {0L, 128L, 64L}) {
      GemmProblem p;
      p.a = a; p.b = b; p.d = d; p.m = n; p.n = n; p.k = k; p.promote_k = promote;
      size_t ws = G::workspace(p);
      void* w = nullptr;
      if (ws) cudaMalloc(&w, ws);
      std::string e = G::run(p, w, 0);
      if (!e.empty()) { printf("error: %s\n", e.c_str()); return 1; }
      cudaEvent_t t0, t1;
      cudaEventCreate(&t0); cudaEventCreate(&t1);
      std::vector<float> ms;
      for (int r = 0; r < 7; ++r) {
        cudaEventRecord(t0);
        G::run(p, w, 0);
        cudaEventRecord(t1);
        cudaEventSynchronize(t1);
        float x; cudaEventElapsedTime(&x, t0, t1); ms.push_back(x);
      }
      std::sort(ms.begin(), ms.end());
      printf("tileN=%d clusterM=%d K=%ld promote=%ld: %.3f ms %.1f TFLOP/s\n", TILE_N, CLUSTER_M, (long)k, (long)promote,
             ms[3], 2.0 * n * n * k / (ms[3] * 1e-3) / 1e12);
      if (w) cudaFree(w);
    }
    cudaFree(a); cudaFree(b); cudaFree(d);
  }
  return cudaGetLastError() != cudaSuccess;
}
