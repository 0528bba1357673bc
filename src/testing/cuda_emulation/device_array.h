#pragma once
// Emulated device memory holding `count` elements of a dtype (never zero bytes), typed pointers into it and CUDA
// views of it: the MoE kernels' emulated cases build their operands and workspaces from these.
#include <algorithm>
#include <cstddef>
#include <initializer_list>

#include "core/dtype.h"
#include "core/tensor.h"
#include "testing/cuda_emulation/cta.h"

namespace attnzoo::cuda_emulation {

struct DeviceArray {
  DeviceMemory mem;
  DeviceArray(size_t count, DType dtype) : mem(std::max<size_t>(count, 1) * dtype_size(dtype)) {}
  template <class T>
  T* at() const {
    return reinterpret_cast<T*>(mem.data());
  }
  TensorView view(DType dtype, std::initializer_list<int64_t> shape) const {
    TensorView t = TensorView::contiguous(mem.data(), dtype, shape);
    t.device = Device::cuda();
    return t;
  }
};

}  // namespace attnzoo::cuda_emulation
