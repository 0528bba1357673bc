#include "core/tensor.h"

#include "core/error.h"

namespace attnzoo {

std::string TensorView::shape_str() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

TensorView TensorView::contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.ndim = int(shape.size());
  int i = 0;
  for (int64_t s : shape) t.shape[i++] = s;
  int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.strides[d] = stride;
    stride *= t.shape[d];
  }
  return t;
}

void require_host(const TensorView& t, const char* name) {
  require(t.device.is_cpu(), name, [&] { return "lives on " + t.device.str() + "; this operation runs on the CPU only"; });
}

}  // namespace attnzoo
