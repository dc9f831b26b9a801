// jaxemu int8 kernels: host interface (see int8/params.h for the problems).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "int8/tables.h"
#include "int8/params.h"

namespace jaxemu {
namespace int8 {

// "" when the GEMM can run, else why not.
std::string check(const GemmProblem& p);
// The configuration the launch heuristic picks, and the device workspace it needs.
GemmConfig choose(const GemmProblem& p, int sm_count);
size_t workspace_size(GemmConfig cfg, const GemmProblem& p, int sm_count);
// Launches on `stream` (no host synchronisation); "" or an error message.
// `workspace` holds workspace_size(cfg, p, sm_count) bytes (may be null when 0).
std::string run(GemmConfig cfg, const GemmProblem& p, int sm_count, void* workspace, cudaStream_t stream);

// The residue tables come from setup_residues, the CRT's from setup_crt
// (ffi/int8/tables.h).
std::string check(const ResidueProblem& p);
std::string run(const ResidueProblem& p, cudaStream_t stream);
std::string check(const CrtProblem& p);
std::string run(const CrtProblem& p, cudaStream_t stream);

// Multiprocessors of `device` (cached per device); of the current device.
int sm_count(int device);
int sm_count();

}  // namespace int8
}  // namespace jaxemu
