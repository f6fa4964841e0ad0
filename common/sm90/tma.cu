// The tensor maps of common/sm90/tma.hpp, encoded by the driver through the runtime's entry
// point (no link against libcuda).
#include "sm90/tma.hpp"

#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000

#include <cstdint>
#include <mutex>
#include <string>

#include "core/check.cuh"
#include "sm90/smem_layout.hpp"

namespace ft::sm90 {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_function() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || p == nullptr)
      throw Unsupported("TMA: this driver has no cuTensorMapEncodeTiled (needs a CUDA 12 driver or newer)");
    fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  });
  return fn;
}

}  // namespace

CUtensorMap tensor_map(const void* base, DType dtype, int batch, int heads, int rows, int cols,
                       const Strides& s, int box_rows) {
  if (dtype != DType::BFloat16 && dtype != DType::Float16)
    throw Unsupported("TMA: the maps here are of bf16 or fp16 tensors");
  constexpr int64_t kAlign = 16;  // the copy engine's rule for the base and every stride, in bytes
  const int64_t bytes = int64_t(dtype_bytes(dtype));
  if (reinterpret_cast<uintptr_t>(base) % kAlign != 0 || s.row * bytes % kAlign != 0 ||
      s.head * bytes % kAlign != 0 || s.batch * bytes % kAlign != 0)
    throw Unsupported("TMA: the tensor's start and its row, head and batch strides must be multiples "
                      "of 16 bytes (8 elements); copy it to contiguous memory first");
  CUtensorMap map{};
  const cuuint64_t dims[4] = {cuuint64_t(cols), cuuint64_t(rows), cuuint64_t(heads), cuuint64_t(batch)};
  // A dimension of one element has no stride the driver checks; give it a valid one.
  const cuuint64_t strides[3] = {cuuint64_t(s.row * bytes), cuuint64_t((heads > 1 ? s.head : s.row * rows) * bytes),
                                 cuuint64_t((batch > 1 ? s.batch : s.row * rows * heads) * bytes)};
  const cuuint32_t box[4] = {cuuint32_t(kPanelCols), cuuint32_t(box_rows), 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUresult r = encode_function()(
      &map, dtype == DType::BFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      4, const_cast<void*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Unsupported("TMA: cuTensorMapEncodeTiled refused the tensor (CUresult " + std::to_string(int(r)) + ")");
  return map;
}

}  // namespace ft::sm90
