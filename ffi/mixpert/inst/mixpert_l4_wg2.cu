// MixPert level 4: 3 slices of A, 3 of B (ffi/mixpert/params.h), 2 consumer
// warpgroups (128 x 64 tiles; ffi/mixpert_dispatch.cu chooses per shape).
#include "../launch.cuh"

namespace jaxemu {
namespace mixpert {

std::string run_l4_wg2(const Problem& p, cudaStream_t stream) { return launch<Traits<3, 3, 64, 2>>(p, stream); }

}  // namespace mixpert
}  // namespace jaxemu
