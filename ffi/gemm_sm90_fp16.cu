// Instantiation of the promoted sm90 GEMM for fp16 slices (one file per type so builds run in parallel).
#include "gemm_sm90.cuh"

namespace jaxemu {
namespace sm90 {

using Gemm_fp16 = PromotedGemm<cutlass::half_t, 64>;

std::string run_fp16(const GemmProblem& p, void* ws, cudaStream_t s) { return Gemm_fp16::run(p, ws, s); }
std::string check_fp16(const GemmProblem& p) { return Gemm_fp16::check(p); }
size_t workspace_fp16(const GemmProblem& p) { return Gemm_fp16::workspace(p); }

}  // namespace sm90
}  // namespace jaxemu
