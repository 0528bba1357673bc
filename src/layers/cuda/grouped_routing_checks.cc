// DeepSeek's grouped routing on CUDA, the host side that needs no CUDA: the options from a DeepseekMoeConfig and
// every refusal before a launch. The config checks repeat deepseek_moe.cc's, names and bounds alike.
#include <cmath>
#include <string>

#include "core/error.h"
#include "layers/cuda/routing_cuda.h"
#include "layers/cuda/rows.h"
#include "layers/deepseek_moe.h"

namespace attnzoo {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

GroupedRouteCudaOptions grouped_route_options(const DeepseekMoeConfig& c) {
  GroupedRouteCudaOptions o;
  o.top_k = c.top_k;
  o.n_group = c.n_group;
  o.topk_group = c.topk_group;
  o.softmax = c.scoring == DeepseekScoring::softmax;
  o.group_max = c.group_score == DeepseekGroupScore::max;
  o.norm_topk_prob = c.norm_topk_prob;
  o.routed_scaling_factor = c.routed_scaling_factor;
  o.norm_epsilon = c.norm_epsilon;
  return o;
}

void check_route_grouped_top_k_cuda(const TensorView& logits, const TensorView& correction_bias,
                                    const TensorView& experts, const TensorView& weights,
                                    const GroupedRouteCudaOptions& c) {
  require_cuda_tensor(logits, "logits");
  require_float_dtype(logits, "logits");
  require(logits.ndim == 2 && logits.shape[0] >= 0 && logits.strides[0] >= 0 &&
              (logits.strides[1] == 1 || logits.shape[1] <= 1),
          "logits", [&] { return "expected [tokens, experts] with contiguous rows, got " + logits.shape_str(); });
  const int64_t T = logits.shape[0], E = logits.shape[1];
  require(E >= 1 && E <= kMaxExpertsCuda, "logits", [&] {
    return "CUDA routing takes 1 to " + str(kMaxExpertsCuda) + " experts (one warp per token), got " + str(E);
  });
  require(c.top_k >= 1 && c.top_k <= E, "num_experts_per_tok",
          [&] { return "must be in [1, " + str(E) + "], got " + str(c.top_k); });
  require(c.n_group >= 1 && E % c.n_group == 0, "n_group",
          [&] { return "must divide n_routed_experts (" + str(E) + "), got " + str(c.n_group); });
  require(c.topk_group >= 1 && c.topk_group <= c.n_group, "topk_group",
          [&] { return "must be in [1, n_group = " + str(c.n_group) + "], got " + str(c.topk_group); });
  require(c.top_k <= c.topk_group * (E / c.n_group), "num_experts_per_tok",
          "exceeds the experts of the topk_group kept groups");
  require(std::isfinite(c.routed_scaling_factor), "routed_scaling_factor", "must be finite");
  require(c.n_group <= kMaxGroupsCuda, "n_group", [&] {
    return "CUDA grouped routing keeps at most " + str(kMaxGroupsCuda) + " groups (a lane each), got " + str(c.n_group);
  });
  require(c.top_k <= kMaxTopKCuda, "num_experts_per_tok", [&] {
    return "CUDA routing chooses at most " + str(kMaxTopKCuda) + " experts per token (a lane each), got " +
           str(c.top_k);
  });
  if (!correction_bias.empty()) {
    require_cuda_tensor(correction_bias, "correction_bias", &logits.device);
    if (correction_bias.dtype != DType::f32)
      throw DTypeError(std::string("correction_bias: must be float32 (widened once, as the CPU layer holds it), got ") +
                       dtype_name(correction_bias.dtype));
    require(correction_bias.ndim == 1 && correction_bias.shape[0] == E && correction_bias.strides[0] == 1,
            "correction_bias", [&] { return "expected a contiguous [" + str(E) + "], got " + correction_bias.shape_str(); });
  }
  auto check_out = [&](const TensorView& t, const char* name, DType dtype) {
    require_cuda_tensor(t, name, &logits.device);
    if (t.dtype != dtype)
      throw DTypeError(std::string(name) + ": must be " + dtype_name(dtype) + ", got " + dtype_name(t.dtype));
    require(t.ndim == 2 && t.shape[0] == T && t.shape[1] == c.top_k && t.is_contiguous(), name, [&] {
      return "expected a contiguous [" + str(T) + ", " + str(c.top_k) + "], got " + t.shape_str();
    });
  };
  check_out(experts, "experts", DType::i32);
  check_out(weights, "weights", DType::f32);
}

}  // namespace attnzoo
