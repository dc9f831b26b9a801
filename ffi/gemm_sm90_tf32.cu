// Instantiation of the promoted sm90 GEMM for tf32 slices (one file per type so builds run in parallel).
#include "gemm_sm90.cuh"

namespace jaxemu {
namespace sm90 {

using Gemm_tf32 = PromotedGemm<float, 32>;

std::string run_tf32(const GemmProblem& p, void* ws, cudaStream_t s) { return Gemm_tf32::run(p, ws, s); }
std::string check_tf32(const GemmProblem& p) { return Gemm_tf32::check(p); }
size_t workspace_tf32(const GemmProblem& p) { return Gemm_tf32::workspace(p); }

}  // namespace sm90
}  // namespace jaxemu
