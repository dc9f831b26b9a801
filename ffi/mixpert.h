// jaxemu MixPert kernel: host interface (see mixpert/params.h for the problem).
#pragma once

#include <string>

#include <cuda_runtime.h>

#include "mixpert/params.h"

namespace jaxemu {
namespace mixpert {

// "" when a kernel exists for p's slice counts (MixPert levels I-IV) and p
// can run, else why not.
std::string check(const Problem& p);
// Launches on `stream` (no host synchronisation); "" or an error message.
std::string run(const Problem& p, cudaStream_t stream);

// The split (params.h: SplitProblem): "" when p can run, else why not.
std::string check(const SplitProblem& p);
// Launches on `stream`; "" or an error message.
std::string run(const SplitProblem& p, cudaStream_t stream);

// The float fallback, in place on C (params.h: FallbackProblem): "" when p
// can run, else why not.
std::string check(const FallbackProblem& p);
// Launches its two kernels on `stream`; "" or an error message.
std::string run(const FallbackProblem& p, cudaStream_t stream);

}  // namespace mixpert
}  // namespace jaxemu
