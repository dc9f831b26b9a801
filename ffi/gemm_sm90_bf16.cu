// Instantiation of the promoted sm90 GEMM for bf16 slices (one file per type so builds run in parallel).
#include "gemm_sm90.cuh"

namespace jaxemu {
namespace sm90 {

using Gemm_bf16 = PromotedGemm<cutlass::bfloat16_t, 64>;

std::string run_bf16(const GemmProblem& p, void* ws, cudaStream_t s) { return Gemm_bf16::run(p, ws, s); }
std::string check_bf16(const GemmProblem& p) { return Gemm_bf16::check(p); }
size_t workspace_bf16(const GemmProblem& p) { return Gemm_bf16::workspace(p); }

}  // namespace sm90
}  // namespace jaxemu
