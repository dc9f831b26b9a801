// MixPert level 2: 2 slices of A, 3 of B (ffi/mixpert/params.h).
#include "../launch.cuh"

namespace jaxemu {
namespace mixpert {

std::string run_l2(const Problem& p, cudaStream_t stream) { return launch<Traits<2, 3, 64, 3>>(p, stream); }

}  // namespace mixpert
}  // namespace jaxemu
