// jaxemu auto's data test on the GPU: host interface (see stats/params.h).
#pragma once

#include <string>

#include <cuda_runtime.h>

#include "stats/params.h"

namespace jaxemu {
namespace stats {

// "" when the problem can run, else why not; launches on `stream` (no host
// synchronisation).
std::string check(const RowStatsProblem& p);
std::string run(const RowStatsProblem& p, cudaStream_t stream);
std::string check(const ColStatsProblem& p);
std::string run(const ColStatsProblem& p, cudaStream_t stream);

}  // namespace stats
}  // namespace jaxemu
