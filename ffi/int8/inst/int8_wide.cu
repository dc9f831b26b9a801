// The wide int8 GEMM configuration (ffi/int8/gemm.cuh).
#include "../gemm.cuh"

namespace jaxemu {
namespace int8 {

size_t workspace_wide(const GemmProblem& p, int sms) { return WideGemm::workspace_size(p, sms); }
std::string run_wide(const GemmProblem& p, int sms, void* ws, cudaStream_t stream) {
  return WideGemm::run(p, sms, ws, stream);
}

}  // namespace int8
}  // namespace jaxemu
