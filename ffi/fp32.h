// jaxemu's FP32 GEMM: host interface (see fp32/params.h).
#pragma once

#include <string>

#include <cuda_runtime.h>

#include "common/gate.h"
#include "fp32/params.h"

namespace jaxemu {
namespace fp32 {

// "" when p can run, else why not.
std::string check(const Problem& p);
// Launches on `stream` (no host synchronisation); "" or an error message.
// `gate` (common/gate.h): closed, the launch writes nothing.
std::string run(const Problem& p, cudaStream_t stream, Gate gate = {});

}  // namespace fp32
}  // namespace jaxemu
