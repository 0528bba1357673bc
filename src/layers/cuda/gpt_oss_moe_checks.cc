// gpt_oss_moe_cuda.h's host side that needs no CUDA: every refusal before a launch.
#include <cmath>
#include <string>

#include "core/error.h"
#include "layers/cuda/gpt_oss_moe_cuda.h"
#include "layers/cuda/routing_cuda.h"
#include "layers/cuda/rows.h"

namespace attnzoo {
namespace {

void require_same_shape(const TensorView& t, const TensorView& like, const char* name, const char* like_name) {
  require(t.shape[0] == like.shape[0] && t.shape[1] == like.shape[1], name,
          [&] { return "shape " + t.shape_str() + " differs from " + like_name + "'s " + like.shape_str(); });
}

}  // namespace

void check_grouped_bias_cuda(const TensorView& y, const TensorView& bias, const TensorView* offsets) {
  require_f32_matrix(y, "y", nullptr);
  require_f32_matrix(bias, "bias", &y.device);
  require(bias.is_contiguous(), "bias", "must be contiguous");
  require(bias.shape[1] == y.shape[1], "bias",
          [&] { return "has " + std::to_string(bias.shape[1]) + " columns, y " + std::to_string(y.shape[1]); });
  require(y.shape[0] < (int64_t(1) << 31) && y.shape[1] < (int64_t(1) << 31), "y", "too large");
  const int64_t E = bias.shape[0];
  if (!offsets) {
    require(E == 1, "bias", [&] { return "without offsets takes one row, got " + bias.shape_str(); });
    return;
  }
  require(E >= 1 && E <= kMaxExpertsCuda, "bias",
          [&] { return "expected 1 to " + std::to_string(kMaxExpertsCuda) + " experts' rows, got " + bias.shape_str(); });
  require_cuda_tensor(*offsets, "offsets", &y.device);
  if (offsets->dtype != DType::i32)
    throw DTypeError(std::string("offsets: dtype ") + dtype_name(offsets->dtype) + ", expected int32");
  require(offsets->ndim == 1 && offsets->shape[0] == E + 1 && offsets->is_contiguous(), "offsets",
          [&] { return "expected a contiguous [" + std::to_string(E + 1) + "], got " + offsets->shape_str(); });
}

void check_gpt_oss_swiglu_cuda(const TensorView& gate, const TensorView& up, float alpha, float limit,
                               const TensorView& out) {
  require_f32_matrix(gate, "gate", nullptr);
  require_f32_matrix(up, "up", &gate.device);
  require_f32_matrix(out, "out", &gate.device);
  require_same_shape(up, gate, "up", "gate");
  require_same_shape(out, gate, "out", "gate");
  require(std::isfinite(alpha), "alpha", "must be finite");
  require(std::isfinite(limit) && limit > 0.f, "limit", [&] { return "must be finite and positive, got " +
                                                                     std::to_string(limit); });
}

#if !defined(ATTNZOO_WITH_CUDA)
// A build without CUDA: the checks refuse what they would, then the build says why the rest cannot run.
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw DeviceError(std::string(what) + ": this build has no CUDA (ATTNZOO_CUDA=OFF or no compiler found)");
}
}  // namespace
void grouped_bias_cuda(const TensorView& y, const TensorView& bias, const TensorView* offsets, Stream) {
  check_grouped_bias_cuda(y, bias, offsets);
  no_cuda("grouped_bias_cuda");
}
void gpt_oss_swiglu_cuda(const TensorView& gate, const TensorView& up, float alpha, float limit,
                         const TensorView& out, Stream) {
  check_gpt_oss_swiglu_cuda(gate, up, alpha, limit, out);
  no_cuda("gpt_oss_swiglu_cuda");
}
#endif

}  // namespace attnzoo
