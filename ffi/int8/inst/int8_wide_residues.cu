// The wide int8 GEMM configuration with the residue epilogue (ffi/int8/gemm.cuh, epilogue.cuh).
#include "../gemm.cuh"

namespace jaxemu {
namespace int8 {

size_t workspace_wide_residues(const GemmProblem& p, int sms) { return WideResidueGemm::workspace_size(p, sms); }
std::string run_wide_residues(const GemmProblem& p, int sms, void* ws, cudaStream_t stream) {
  return WideResidueGemm::run(p, sms, ws, stream);
}

}  // namespace int8
}  // namespace jaxemu
