#pragma once
// A TMA tensor map (the operand of cp.async.bulk.tensor) described in plain C++, so the launch plans build it in
// every configuration: on a GPU it is encoded into the driver's opaque 128-byte CUtensorMap
// (encode_tensor_map), under the kernel emulator the description itself is the map its copies read.
#include <cstdint>

namespace attnzoo::sm90 {

// A tiled map: `rank` dimensions, innermost first; 128-byte swizzle, out-of-bounds elements read as zeros.
struct TensorMapSpec {
  const void* base = nullptr;  // 16-byte aligned
  int rank = 0;                // 2..4
  int elem_bytes = 2;
  uint64_t dims[4] = {};     // elements along each dimension
  uint64_t strides[4] = {};  // bytes between consecutive indices of dims 1..rank-1 (multiples of 16); [0] unused
  uint32_t box[4] = {};      // elements one copy takes along each dimension; box[0] * elem_bytes == 128
};

#if defined(ATTNZOO_CUDA_EMULATION)
using TensorMap = TensorMapSpec;
inline TensorMap encode_tensor_map(const TensorMapSpec& spec) { return spec; }
#else
// The driver's CUtensorMap, copied into kernel parameters (__grid_constant__) as is.
struct alignas(128) TensorMap {
  uint64_t opaque[16];
};
// cuTensorMapEncodeTiled, reached through cudaGetDriverEntryPointByVersion so nothing links libcuda. DeviceError
// naming the call when the driver refuses.
TensorMap encode_tensor_map(const TensorMapSpec& spec);
#endif

}  // namespace attnzoo::sm90
