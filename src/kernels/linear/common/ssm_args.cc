#include "kernels/linear/common/ssm_args.h"

#include "core/dtype.h"
#include "core/error.h"
#include "core/float_dtype.h"

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
  require_float_dtype(t, name);
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

PoolStates require_pool_states(const TensorView& initial_state, const TensorView& final_state, const char* indices,
                               Device device, std::initializer_list<PoolDim> row, const char* initial_name,
                               const char* final_name) {
  require(!device.is_cpu(), indices, "addresses device states only (the CPU entries take dense states)");
  const TensorView& s = final_state;
  require(!s.empty() && initial_state.data == s.data, final_name,
          [&] { return std::string("with ") + indices + " must be " + initial_name +
                       " (the pool's states, updated in place)"; });
  require(s.device == device, final_name, [&] { return "lives on " + s.device.str() + ", the call on " + device.str(); });
  if (s.dtype != DType::f32)
    throw DTypeError(std::string(final_name) + ": expected float32 (states are kept in f32), got " +
                     dtype_name(s.dtype));
  std::string want = "[slots", dims = "[";
  bool shape_ok = s.ndim == int(row.size()) + 1;
  int d = 1;
  for (const PoolDim& r : row) {
    want += ", " + (r.size < 0 ? std::string(r.name) : std::to_string(r.size));
    dims += (d > 1 ? ", " : "") + std::string(r.name);
    shape_ok = shape_ok && (r.size < 0 || s.shape[size_t(d)] == r.size);
    ++d;
  }
  require(shape_ok, final_name, [&] { return "expected " + want + "], got " + s.shape_str(); });
  // Each slot's state contiguous, slots at least a state apart (overlapping rows would race).
  int64_t size = 1;
  bool rows_ok = true;
  for (int i = s.ndim - 1; i >= 1; --i) {
    rows_ok = rows_ok && s.strides[size_t(i)] == size;
    size *= s.shape[size_t(i)];
  }
  require(rows_ok && s.strides[0] >= size, final_name,
          [&] { return "needs contiguous " + dims + "] rows, one pool row apart"; });
  bool same = initial_state.ndim == s.ndim && initial_state.dtype == s.dtype;
  for (int i = 0; same && i < s.ndim; ++i)
    same = initial_state.shape[size_t(i)] == s.shape[size_t(i)] && initial_state.strides[size_t(i)] == s.strides[size_t(i)];
  require(same, initial_name, [&] { return std::string("must have ") + final_name + "'s shape and row stride"; });
  return {s.ptr<float>(), s.strides[0]};
}

std::vector<float> to_f32_vector(const TensorView& t) {
  std::vector<float> out(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[size_t(i)] = load_as_f32(t.data, t.dtype, i);
  return out;
}

}  // namespace attnzoo::ssm
