// The int8 GEMM's residue epilogue for Ozaki II (params.h: GemmProblem::r):
// each exact int32 sum is reduced modulo its batch entry's modulus and stored
// as one byte, which is all the CRT needs of it. An epilogue visitor node
// (CUTLASS 3's sm90 fusion callbacks), the root of Sm90EVT<ResidueNode,
// Sm90AccFetch>: it receives the accumulator fragment and returns the
// fragment that the TMA store writes.
//
// Why in the epilogue: at 8192^3 with 8 moduli the int32 products are 2 GiB
// written by the GEMM and read back by the CRT kernel (0.87 ms of ozaki2_f32's
// 7.9 on an H100, at 81 % of DRAM bandwidth); their residues are 512 MiB.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/array.h"
#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"

#include "modular.cuh"
#include "params.h"

namespace jaxemu {
namespace int8 {

struct ResidueNode {
  struct SharedStorage {};
  struct Arguments {
    Modulus moduli[kMaxModuli] = {};
    int per_modulus = 1;  // batch entry l has modulus moduli[l / per_modulus]
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.per_modulus >= 1;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }

  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }

  CUTLASS_HOST_DEVICE ResidueNode() {}
  // A pointer to the kernel's parameters (in parameter space), not a copy of
  // the 320-byte table in every thread.
  CUTLASS_HOST_DEVICE ResidueNode(Params const& params, SharedStorage const&) : params_ptr(&params) {}
  Params const* params_ptr = nullptr;

  template <class... Args>
  CUTLASS_DEVICE auto get_producer_load_callbacks(cutlass::epilogue::fusion::ProducerLoadArgs<Args...> const&) {
    return cutlass::epilogue::fusion::EmptyProducerLoadCallbacks{};
  }

  struct ConsumerStoreCallbacks : cutlass::epilogue::fusion::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE explicit ConsumerStoreCallbacks(Modulus q) : q(q) {}
    Modulus q;  // this tile's modulus

    template <class ElementAccumulator, class ElementInput, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<uint8_t, FragmentSize> visit(
        cutlass::Array<ElementAccumulator, FragmentSize> const&, int, int, int,
        cutlass::Array<ElementInput, FragmentSize> const& sums) {
      cutlass::Array<uint8_t, FragmentSize> out;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) out[i] = uint8_t(mod_i32(int32_t(sums[i]), q));
      return out;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(cutlass::epilogue::fusion::ConsumerStoreArgs<Args...> const& args) {
    const int l = int(cute::get<3>(args.tile_coord_mnkl));
    return ConsumerStoreCallbacks(params_ptr->moduli[l / params_ptr->per_modulus]);
  }
};

}  // namespace int8
}  // namespace jaxemu
