// MixPert level 3: 3 slices of A, 2 of B (ffi/mixpert/params.h), 3 consumer
// warpgroups (192 x 64 tiles; ffi/mixpert_dispatch.cu chooses per shape).
#include "../launch.cuh"

namespace jaxemu {
namespace mixpert {

std::string run_l3_wg3(const Problem& p, cudaStream_t stream) { return launch<Traits<3, 2, 64, 3>>(p, stream); }

}  // namespace mixpert
}  // namespace jaxemu
