/// @file dependent_launch.cuh
/// @brief Programmatic dependent launch (sm_90 on): a kernel launched while the kernel before
/// it in the stream still runs.
///
/// Two kernels in one stream run one after the other: the second is launched once the
/// first has finished, and its blocks start a few microseconds later. When the host
/// launches the second with the attribute cudaLaunchAttributeProgrammaticStreamSerialization,
/// the two instructions below let them overlap:
///
///     first kernel (the primary)           second kernel (the dependent)
///     launch_dependents(): "my block       ...its blocks may now be scheduled...
///       no longer holds the next one"      wait_for_prerequisites(): until the primary
///     ...its work, its stores...             grid has finished and its stores are visible
///                                          ...reads what the primary wrote...
///
/// The dependent is launched once every block of the primary has executed
/// launch_dependents (or finished). Without the attribute both instructions do nothing,
/// so a kernel may carry them whichever way it is launched; before sm_90 they are compiled
/// out (PTX ISA: griddepcontrol).
#pragma once

namespace ft::sm90 {

/// griddepcontrol.launch_dependents: this block lets the dependent grid be launched.
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/// griddepcontrol.wait: until every prerequisite grid has finished and its memory
/// operations are performed and visible to this grid.
__device__ __forceinline__ void wait_for_prerequisites() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace ft::sm90
