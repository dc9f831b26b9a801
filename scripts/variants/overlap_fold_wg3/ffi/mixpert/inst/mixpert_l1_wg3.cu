// Overlay (scripts/kc_profile_session.sh ALTS): MixPert level 1, three consumer
// warpgroups, each folding K-tile t while K-tile t + 1's products run
// (Traits' OverlapFold; two sets of level accumulators: a 48-wide tile
// keeps them within 152 registers).
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED  // wgmma 64 x 48 x 32 (traits.cuh)
#include "../launch.cuh"

namespace jaxemu {
namespace mixpert {

std::string run_l1_wg3(const Problem& p, cudaStream_t stream) { return launch<Traits<2, 2, 48, 3, true>>(p, stream); }

}  // namespace mixpert
}  // namespace jaxemu
