#pragma once
// Mixture-of-experts routing on an NVIDIA GPU, twins of layers/moe.h and layers/gpt_oss_moe.h: router logits
// [T, E] (f32 / bf16 / f16, any row stride) in, expert ids int32 [T, top_k] and f32 weights [T, top_k] out, slots
// in descending score, ties to the lower expert index. One warp per token holds the token's E scores in
// registers and lane r keeps slot r, so E is at most 1024 (kMaxExpertsCuda) and top_k at most 32
// (kMaxTopKCuda) and E.
// DeepSeek's grouped routing (route_grouped_top_k: sigmoid or softmax scores, correction bias, group-limited top-k,
// normalized weights times routed_scaling_factor) runs the same way, with at most 32 groups (kMaxGroupsCuda: a lane
// each).
#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"

namespace attnzoo {

inline constexpr int64_t kMaxExpertsCuda = 1024;
inline constexpr int64_t kMaxTopKCuda = 32;
inline constexpr int64_t kMaxGroupsCuda = 32;

struct DeepseekMoeConfig;  // layers/deepseek_moe.h

enum class RouteOrder {
  softmax_then_top_k,  // route_softmax_top_k (Qwen / Mixtral): softmax over all E, the top_k probabilities
  top_k_then_softmax,  // route_top_k_softmax (gpt-oss): the top_k logits, a softmax over just those
};

struct RouteCudaOptions {
  int64_t top_k = 1;
  RouteOrder order = RouteOrder::softmax_then_top_k;
  bool normalize = false;  // softmax_then_top_k only: the chosen weights renormalized to sum to 1
};

// Every refusal of route_top_k_cuda, before any CUDA call. ArgumentError / DTypeError naming the argument.
void check_route_top_k_cuda(const TensorView& logits, const TensorView& experts, const TensorView& weights,
                            const RouteCudaOptions& opts);

// The launcher (routing.cu, CUDA builds only) checks first, then runs on the tensors' device.
void route_top_k_cuda(const TensorView& logits, const TensorView& experts, const TensorView& weights,
                      const RouteCudaOptions& opts, Stream stream = current_stream());

// The routing fields of a DeepseekMoeConfig, as the grouped kernel takes them (grouped_route_options makes one).
struct GroupedRouteCudaOptions {
  int64_t top_k = 1, n_group = 1, topk_group = 1;
  bool softmax = false;    // DeepseekScoring::softmax (V2); sigmoid (V3) otherwise
  bool group_max = false;  // DeepseekGroupScore::max; the sum of each group's two best otherwise
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.f;
  double norm_epsilon = 1e-20;
};
GroupedRouteCudaOptions grouped_route_options(const DeepseekMoeConfig& config);

// Every refusal of route_grouped_top_k_cuda, before any CUDA call: logits as route_top_k_cuda takes them,
// correction_bias empty or a contiguous f32 [E] on the logits' device, the config as route_grouped_top_k checks it
// (errors naming num_experts_per_tok, n_group, topk_group, routed_scaling_factor) and n_group <= 32, top_k <= 32;
// experts int32 / weights f32 [T, top_k] contiguous. ArgumentError / DTypeError naming the argument.
void check_route_grouped_top_k_cuda(const TensorView& logits, const TensorView& correction_bias,
                                    const TensorView& experts, const TensorView& weights,
                                    const GroupedRouteCudaOptions& opts);

// The twin of route_grouped_top_k (grouped_routing.cu, CUDA builds only): ids exactly, weights within a few f32 ulp
// (the chosen scores' double sum in the warp's order).
void route_grouped_top_k_cuda(const TensorView& logits, const TensorView& correction_bias, const TensorView& experts,
                              const TensorView& weights, const GroupedRouteCudaOptions& opts,
                              Stream stream = current_stream());

}  // namespace attnzoo
