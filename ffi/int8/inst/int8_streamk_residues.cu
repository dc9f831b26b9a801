// The stream-K int8 GEMM configuration with the residue epilogue (ffi/int8/gemm.cuh, epilogue.cuh).
#include "../gemm.cuh"

namespace jaxemu {
namespace int8 {

size_t workspace_streamk_residues(const GemmProblem& p, int sms) { return StreamKResidueGemm::workspace_size(p, sms); }
std::string run_streamk_residues(const GemmProblem& p, int sms, void* ws, cudaStream_t stream) {
  return StreamKResidueGemm::run(p, sms, ws, stream);
}

}  // namespace int8
}  // namespace jaxemu
