// MixPert level 1: 2 slices of A, 2 of B (ffi/mixpert/params.h).
#include "../launch.cuh"

namespace jaxemu {
namespace mixpert {

std::string run_l1(const Problem& p, cudaStream_t stream) { return launch<Traits<2, 2, 64, 3>>(p, stream); }

}  // namespace mixpert
}  // namespace jaxemu
