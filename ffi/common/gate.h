// A kernel's gate: auto's choice made on the device (docs/auto.md, "The
// choice on the device"). XLA's data test writes the index of the chosen
// candidate into an int32 on the device; every kernel of every candidate
// is launched, and a kernel whose candidate was not chosen does no work and
// writes none of its outputs (a split's max |x|, zeroed by its caller,
// stays 0), so that no conditional (whose predicate the host waits for)
// sits between the test and the product.
#pragma once

#include <cstdint>

namespace jaxemu {

struct Gate {
  const int32_t* choice = nullptr;  // null: no gate, the kernel always runs
  uint32_t run_if = 0;              // the kernel runs iff bit *choice is set (choices 0..31)
};

#if defined(__CUDACC__)
// Whether g stops the kernel. Every thread of a block reads the same value
// (written by an earlier kernel on the stream), so the whole block returns
// together: safe before any barrier.
__device__ __forceinline__ bool gate_closed(const Gate& g) {
  if (g.choice == nullptr) return false;
  const int32_t c = *g.choice;
  return c < 0 || c > 31 || ((g.run_if >> c) & 1u) == 0;
}
#endif

}  // namespace jaxemu
