#pragma once
// A non-owning view over caller memory: shape and strides (in elements), up to 6 dimensions.
#include <array>
#include <cstdint>
#include <string>

#include "core/device.h"
#include "core/dtype.h"

namespace attnzoo {

struct TensorView {
  static constexpr int kMaxDims = 6;
  void* data = nullptr;
  DType dtype = DType::f32;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> strides{};  // elements, not bytes
  Device device{};  // where `data` lives; kernels that run only on the host refuse any other (require_host)

  bool empty() const { return data == nullptr; }
  int64_t size(int d) const { return shape[d < 0 ? d + ndim : d]; }
  int64_t stride(int d) const { return strides[d < 0 ? d + ndim : d]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  // A view with no elements is contiguous whatever its strides (numpy gives such arrays stride 0), as numpy and
  // torch say.
  bool is_contiguous() const {
    if (numel() == 0) return true;
    int64_t expect = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[i] != expect) return false;
      expect *= shape[i];
    }
    return true;
  }
  template <typename T> T* ptr() const { return static_cast<T*>(data); }
  std::string shape_str() const;

  // A contiguous view with the given shape.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape);
};

// ArgumentError naming `name` unless `t` lives in host memory: every entry point whose kernels read memory on the
// CPU calls it, so a GPU pointer is refused instead of dereferenced.
void require_host(const TensorView& t, const char* name);

}  // namespace attnzoo
