// The stream-K int8 GEMM configuration (ffi/int8/gemm.cuh).
#include "../gemm.cuh"

namespace jaxemu {
namespace int8 {

size_t workspace_streamk(const GemmProblem& p, int sms) { return StreamKGemm::workspace_size(p, sms); }
std::string run_streamk(const GemmProblem& p, int sms, void* ws, cudaStream_t stream) {
  return StreamKGemm::run(p, sms, ws, stream);
}

}  // namespace int8
}  // namespace jaxemu
