// gdn_gates_cuda's refusals (gdn_gates_cuda.h), plain C++ so they hold before any CUDA call and on any machine.
#include <string>
#include <utility>

#include "core/error.h"
#include "layers/cuda/gdn_gates_cuda.h"
#include "layers/cuda/rows.h"

namespace attnzoo {
namespace {

void require_f32(const TensorView& t, const char* name, const Device* device) {
  require_cuda_tensor(t, name, device);
  if (t.dtype != DType::f32) throw DTypeError(std::string(name) + ": expected float32, got " + dtype_name(t.dtype));
}

void require_shape(const TensorView& t, const char* name, int64_t T, int64_t HV) {
  require(t.ndim == 2 && t.shape[0] == T && t.shape[1] == HV, name, [&] {
    return "expected [" + std::to_string(T) + ", " + std::to_string(HV) + "], got " + t.shape_str();
  });
}

}  // namespace

void check_gdn_gates_cuda(const GdnGates& x) {
  require_f32(x.g, "g", nullptr);
  require(x.g.ndim == 2 && x.g.is_contiguous(), "g",
          [&] { return "expected a contiguous [T, HV], got " + x.g.shape_str(); });
  const int64_t T = x.g.shape[0], HV = x.g.shape[1];
  require_f32(x.beta, "beta", &x.g.device);
  require_shape(x.beta, "beta", T, HV);
  require(x.beta.is_contiguous(), "beta", "must be contiguous");
  for (auto [t, name] : {std::pair{&x.b, "b"}, {&x.a, "a"}}) {
    require_f32(*t, name, &x.g.device);
    require_shape(*t, name, T, HV);
    require(t->strides[1] == 1 || HV <= 1, name, "last dimension must be contiguous (stride 1)");
    require(t->strides[0] >= 0, name, "negative row stride");
  }
  for (auto [t, name] : {std::pair{&x.neg_A, "neg_A"}, {&x.dt_bias, "dt_bias"}}) {
    require_f32(*t, name, &x.g.device);
    require(t->ndim == 1 && t->shape[0] == HV && t->is_contiguous(), name,
            [&] { return "expected a contiguous [" + std::to_string(HV) + "], got " + t->shape_str(); });
  }
}

}  // namespace attnzoo
