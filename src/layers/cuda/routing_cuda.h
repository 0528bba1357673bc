#pragma once
// Mixture-of-experts routing on an NVIDIA GPU, twins of layers/moe.h and layers/gpt_oss_moe.h: router logits
// [T, E] (f32 / bf16 / f16, any row stride) in, expert ids int32 [T, top_k] and f32 weights [T, top_k] out, slots
// in descending score, ties to the lower expert index. One warp per token holds the token's E scores in
// registers and lane r keeps slot r, so E is at most 1024 (kMaxExpertsCuda) and top_k at most 32
// (kMaxTopKCuda) and E.
// Not here yet: DeepSeek-V3's sigmoid + correction bias + group-limited routing (route_grouped_top_k).
#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"

namespace attnzoo {

inline constexpr int64_t kMaxExpertsCuda = 1024;
inline constexpr int64_t kMaxTopKCuda = 32;

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

}  // namespace attnzoo
