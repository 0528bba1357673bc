// cuTensorMapEncodeTiled without linking libcuda: the runtime hands out the driver's entry point.
#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/softmax/cuda/tensor_map.h"

namespace attnzoo::sm90 {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encoder() {
  static const EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    cuda_check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found),
               "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    if (found != cudaDriverEntryPointSuccess || !p)
      throw DeviceError("cuTensorMapEncodeTiled: the driver does not provide it (needs CUDA 12 or later)");
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

}  // namespace

TensorMap encode_tensor_map(const TensorMapSpec& spec) {
  static_assert(sizeof(TensorMap) == sizeof(CUtensorMap) && alignof(TensorMap) == alignof(CUtensorMap));
  cuuint64_t dims[4], strides[3];
  cuuint32_t box[4], element_strides[4];
  for (int i = 0; i < spec.rank; ++i) {
    dims[i] = spec.dims[i];
    box[i] = spec.box[i];
    element_strides[i] = 1;
    if (i > 0) strides[i - 1] = spec.strides[i];
  }
  const CUtensorMapDataType type = spec.elem_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  CUtensorMap map;
  // Zero fill out of bounds (FLOAT_OOB_FILL_NONE); the element type only sizes the copy, so f16 uses bf16's.
  const CUresult r = encoder()(&map, type, cuuint32_t(spec.rank), const_cast<void*>(spec.base), dims, strides, box,
                               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw DeviceError("cuTensorMapEncodeTiled: error " + std::to_string(int(r)));
  TensorMap out;
  static_assert(sizeof out == sizeof map);
  __builtin_memcpy(&out, &map, sizeof map);
  return out;
}

}  // namespace attnzoo::sm90
