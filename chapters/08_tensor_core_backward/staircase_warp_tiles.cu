/// @file staircase_warp_tiles.cu
/// @brief Chapter 08's warp-tile variants: warp_tiles, hoisted, spread_atomics.
/// (backward_variants.cuh has the machinery; the four staircase_*.cu files split the
/// variants' kernels so that the chapter compiles in parallel.)
#include "08_tensor_core_backward/backward_variants.cuh"

namespace ch08 {

using namespace detail;

ft::BackwardImpl warp_tiles() {
  return impl<WarpTiles>("warp_tiles", "async, P^T/dS^T via shared memory: 32-row warp tiles in every product");
}
ft::BackwardImpl hoisted() {
  return impl<Hoisted>("hoisted", "warp_tiles, each lane's swizzle computed once: one XOR per load");
}
ft::BackwardImpl spread_atomics() {
  return impl<SpreadAtomics>("spread_atomics", "hoisted, dQ before dK, its atomics between dK's k-steps");
}

}  // namespace ch08
