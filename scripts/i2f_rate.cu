// Throughput of int32 -> float32 conversion (I2F) and FFMA per SM, for the
// MixPert-on-int8 design (docs/performance.md, stop 30). On the GPU machine:
//   nvcc -arch=sm_90a -O3 -o /tmp/i2f scripts/i2f_rate.cu && /tmp/i2f
#include <cstdio>
#include <cuda_runtime.h>
template <int MODE>
__global__ void k(float* out, int iters, int seed) {
  int a[8]; float f[8];
  for (int j = 0; j < 8; ++j) { a[j] = seed * (threadIdx.x + j); f[j] = float(j); }
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (MODE == 0) { f[j] = fmaf(__int2float_rn(a[j]), 1.0001f, f[j]); a[j] += j + 1; }   // I2F + FFMA + IADD
      else { f[j] = fmaf(f[j], 1.0001f, 0.5f); f[j] = fmaf(f[j], 0.9999f, 0.25f); }          // 2 FFMA
    }
  }
  float s = 0; for (int j = 0; j < 8; ++j) s += f[j];
  if (s == 12345.f) out[0] = s;
}
int main() {
  float* out; cudaMalloc(&out, 4);
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int clk; cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
  const int iters = 1 << 14, blocks = sms * 8, threads = 256;
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int mode = 0; mode < 2; ++mode) {
    for (int rep = 0; rep < 2; ++rep) {
      cudaEventRecord(e0);
      if (mode == 0) k<0><<<blocks, threads>>>(out, iters, 3); else k<1><<<blocks, threads>>>(out, iters, 3);
      cudaEventRecord(e1); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1);
      const double ops = double(blocks) * threads * iters * 8;  // per mode: conversions (mode 0) or FFMA pairs (mode 1)
      if (rep) printf("%s: %.1f G/s in all, %.1f per SM per clock (%d SMs, %d MHz)\n",
                      mode == 0 ? "I2F (+FFMA+IADD each)" : "FFMA pairs", ops / ms / 1e6,
                      ops / (ms * 1e-3) / sms / (clk * 1e3), sms, clk / 1000);
    }
  }
  return 0;
}
