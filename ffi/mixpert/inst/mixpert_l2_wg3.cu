// MixPert level 2: 2 slices of A, 3 of B (ffi/mixpert/params.h), 3 consumer
// warpgroups (192 x 64 tiles; ffi/mixpert_dispatch.cu chooses per shape).
#include "../launch.cuh"

namespace jaxemu {
namespace mixpert {

std::string run_l2_wg3(const Problem& p, cudaStream_t stream) { return launch<Traits<2, 3, 64, 3>>(p, stream); }

}  // namespace mixpert
}  // namespace jaxemu
