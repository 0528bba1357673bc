#include "kernels/linear/common/ssm_args.h"

#include "core/dtype.h"
#include "core/error.h"

namespace attnzoo::ssm {

std::string shape_string(std::initializer_list<int64_t> shape) {
  std::string s = "[";
  bool first = true;
  for (int64_t d : shape) {
    if (!first) s += ", ";
    s += std::to_string(d);
    first = false;
  }
  return s + "]";
}

void require_float_rank(const TensorView& t, const char* name, int ndim, Where where) {
  if (where == Where::host) require_host(t, name);
  require(!t.empty(), name, "is required");
  if (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16)
    throw DTypeError(std::string(name) + ": expected float32, bfloat16 or float16, got " + dtype_name(t.dtype));
  require(t.ndim == ndim, name, "expected " + std::to_string(ndim) + " dims, got " + t.shape_str());
  require(t.is_contiguous(), name, "must be contiguous");
}

void require_float_tensor(const TensorView& t, const char* name, std::initializer_list<int64_t> shape,
                          Where where) {
  require_float_rank(t, name, int(shape.size()), where);
  int d = 0;
  for (int64_t s : shape) {
    require(t.shape[size_t(d)] == s, name, "expected shape " + shape_string(shape) + ", got " + t.shape_str());
    ++d;
  }
}

void require_f32_tensor(const TensorView& t, const char* name, std::initializer_list<int64_t> shape,
                        Where where) {
  if (where == Where::host) require_host(t, name);
  require(!t.empty(), name, "is required");
  if (t.dtype != DType::f32)
    throw DTypeError(std::string(name) + ": expected float32 (states are kept in f32), got " + dtype_name(t.dtype));
  require_float_tensor(t, name, shape, where);
}

void require_same_device(std::initializer_list<NamedView> tensors) {
  const NamedView& first = *tensors.begin();
  for (const NamedView& t : tensors)
    if (!t.view->empty())
      require(t.view->device == first.view->device, t.name,
              [&] { return "lives on " + t.view->device.str() + ", " + first.name + " on " + first.view->device.str(); });
}

void require_host_entry(std::initializer_list<NamedView> tensors, const char* entry, const char* also_on_cuda) {
  for (const NamedView& t : tensors)
    if (!t.view->empty())
      require(t.view->device.is_cpu(), t.name, [&] {
        return "lives on " + t.view->device.str() + "; " + entry +
               " runs on the CPU only so far (" + also_on_cuda + " also runs on CUDA)";
      });
}

std::vector<float> to_f32_vector(const TensorView& t) {
  std::vector<float> out(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[size_t(i)] = load_as_f32(t.data, t.dtype, i);
  return out;
}

}  // namespace attnzoo::ssm
