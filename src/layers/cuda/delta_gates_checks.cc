// delta_gates_cuda's refusals (delta_gates_cuda.h), plain C++ so they hold before any CUDA call and on any machine.
#include <string>
#include <utility>

#include "core/error.h"
#include "layers/cuda/delta_gates_cuda.h"
#include "layers/cuda/rows.h"

namespace attnzoo {
namespace {

void require_f32(const TensorView& t, const char* name, const Device* device) {
  require_cuda_tensor(t, name, device);
  if (t.dtype != DType::f32) throw DTypeError(std::string(name) + ": expected float32, got " + dtype_name(t.dtype));
}

void require_rows(const TensorView& t, const char* name, int64_t T, int64_t n) {
  require(t.ndim == 2 && t.shape[0] == T && t.shape[1] == n, name, [&] {
    return "expected [" + std::to_string(T) + ", " + std::to_string(n) + "], got " + t.shape_str();
  });
  require(t.strides[1] == 1 || n <= 1, name, "last dimension must be contiguous (stride 1)");
  require(t.strides[0] >= 0, name, "negative row stride");
}

}  // namespace

void check_delta_gates_cuda(const DeltaGates& x) {
  for (auto [t, name] : {std::pair{&x.g, "g"}, {&x.beta, "beta"}}) {
    require_f32(*t, name, &x.g.device);
    require(t->ndim == 2 && t->is_contiguous(), name,
            [&] { return "expected a contiguous [T, n], got " + t->shape_str(); });
  }
  const int64_t T = x.g.shape[0], Ng = x.g.shape[1], Nb = x.beta.shape[1];
  require(x.beta.shape[0] == T, "beta", [&] { return "has " + std::to_string(x.beta.shape[0]) + " rows, g " +
                                                     std::to_string(T); });
  require_f32(x.a, "a", &x.g.device);
  require_rows(x.a, "a", T, Ng);
  require_f32(x.b, "b", &x.g.device);
  require_rows(x.b, "b", T, Nb);
  require_f32(x.dt_bias, "dt_bias", &x.g.device);
  require(x.dt_bias.ndim == 1 && x.dt_bias.shape[0] == Ng && x.dt_bias.is_contiguous(), "dt_bias",
          [&] { return "expected a contiguous [" + std::to_string(Ng) + "], got " + x.dt_bias.shape_str(); });
  require_f32(x.neg_A, "neg_A", &x.g.device);
  require(x.neg_A.ndim == 1 && x.neg_A.is_contiguous() && x.neg_A.shape[0] >= 1 && Ng % x.neg_A.shape[0] == 0,
          "neg_A", [&] { return "expected a contiguous [n] with n dividing " + std::to_string(Ng) + ", got " +
                                x.neg_A.shape_str(); });
}

}  // namespace attnzoo
