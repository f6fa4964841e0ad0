/// @file tma.hpp
/// @brief The host half of Hopper's bulk tensor copy (TMA): a tensor map, the 128-byte
/// descriptor of a tensor in device memory that the copy engine reads tiles of.
///
/// A kernel that copies with TMA names a tile by its coordinates, not its addresses: one
/// thread issues `cp.async.bulk.tensor` with the map and (column, row, head, batch), and the
/// copy engine fetches the whole box, swizzles it as the map says (128-byte, the layout
/// `wgmma` reads: smem_layout.hpp) and fills rows past the tensor's end with zeros. The map
/// is built on the host by the driver's cuTensorMapEncodeTiled, reached through the
/// runtime's cudaGetDriverEntryPointByVersion so that no program links the driver library,
/// and passed to the kernel by value as a `const __grid_constant__ CUtensorMap` parameter.
#pragma once

#include <cuda.h>  // CUtensorMap (types only: nothing here links libcuda)

#include "core/dtype.hpp"
#include "core/strides.hpp"

namespace ft::sm90 {

/// The map of a [batch][heads][rows][cols] tensor of 16-bit elements at `base`, strided as
/// `s` (elements), read in boxes of `box_rows` rows × 64 columns (one 128-byte panel).
/// Throws ft::Unsupported when the copy engine cannot read it (base or strides not multiples
/// of 16 bytes), naming what to change.
CUtensorMap tensor_map(const void* base, DType dtype, int batch, int heads, int rows, int cols,
                       const Strides& s, int box_rows);

}  // namespace ft::sm90
