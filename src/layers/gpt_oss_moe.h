#pragma once
// gpt-oss mixture of experts:
//   logits = router(x)  (Linear with bias);  experts = top_k(logits);  weights = softmax over those k logits
//   out = sum_j weights_j * expert_{experts_j}(x)
//   expert(x) = down(clamped_swiglu(gate_up(x))) (both projections with bias), where per feature
//     gate = min(gate, limit);  up = clamp(up, -limit, limit);  h = (up + 1) * gate * sigmoid(alpha * gate)
// The checkpoint stores all experts fused and transposed relative to nn.Linear (x @ W): gate_up [E, hidden, 2I]
// with gate and up features interleaved (column 2i is gate i, 2i + 1 is up i), down [E, I, hidden]. At load each
// expert is rewritten once into the [out, in] layout Linear streams fastest, gate rows then up rows, so the
// per-token work is ordinary projections; that copy is owned (owned_weight_bytes()).
// Experts may also come as ready projections (GptOssExpert) in any weight format: the MXFP4 blocks of the released
// checkpoints repacked into GGUF's block layout, or a GGUF's stacked experts borrowed from the mapping; the
// quantized ones then run Linear's quantized GEMV (decode) and dequantized panels (prefill).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/block_parts.h"
#include "layers/linear.h"
#include "layers/moe.h"

namespace attnzoo {

struct GptOssMoeConfig {
  int64_t top_k = 4;
  float alpha = 1.702f;  // swiglu_alpha: sigmoid gain
  float limit = 7.0f;    // swiglu_limit: clamp of gate (above) and up (both sides)
};

// The fused expert tensors as transformers' GptOssExperts holds them (f32 / bf16 / f16, contiguous).
struct GptOssExpertTensors {
  TensorView gate_up;       // [E, hidden, 2I], interleaved gate/up columns
  TensorView gate_up_bias;  // [E, 2I], interleaved like the columns
  TensorView down;          // [E, I, hidden]
  TensorView down_bias;     // [E, hidden]
};

// One expert as three projections W x + b: gate and up [I, hidden], down [hidden, I]; dense or block-quantized.
struct GptOssExpert {
  Linear gate, up, down;
};

// h[i] = (clamp(up[i], -limit, limit) + 1) * g * sigmoid(alpha * g), g = min(gate[i], limit); n features.
void gpt_oss_clamped_swiglu(const float* gate, const float* up, float alpha, float limit, float* h, int64_t n);

// Top-k router logits per token, then a softmax over just those k (slots in descending logit, ties to the lower
// expert index as torch.topk on CPU).
void route_top_k_softmax(const float* logits, int64_t T, int64_t E, int64_t top_k, MoeRouting& out);

class GptOssMoe : public FeedForward {
 public:
  // router [E, hidden] (+ bias [E]); `store` is the weight precision (f32 or bf16, see Linear::from_weights).
  // Errors name `name` (e.g. "model.layers.0.mlp").
  GptOssMoe(const GptOssMoeConfig& config, Linear router, const GptOssExpertTensors& experts, DType store,
            const std::string& name);
  // Experts already built (all of one shape, checked: errors name `name`.experts.<e>); `owned` is storage they
  // view that this layer keeps alive (nullptr when they borrow the checkpoint's mapping).
  GptOssMoe(const GptOssMoeConfig& config, Linear router, std::vector<GptOssExpert> experts,
            std::shared_ptr<std::vector<uint8_t>> owned, const std::string& name);

  int64_t num_experts() const { return int64_t(experts_.size()); }
  int64_t hidden() const { return router_.in_features(); }
  int64_t intermediate() const { return experts_[0].down.in_features(); }
  const GptOssExpert& expert(int64_t e) const { return experts_[size_t(e)]; }
  const std::vector<GptOssExpert>& experts() const { return experts_; }
  const Linear& router() const { return router_; }
  const GptOssMoeConfig& config() const { return config_; }
  uint64_t weight_bytes() const override;
  uint64_t decode_weight_bytes() const override;
  // Bytes of the re-laid-out expert weights this layer holds (not borrowed from the checkpoint).
  uint64_t owned_weight_bytes() const { return owned_ ? uint64_t(owned_->size()) : 0; }
  void forward(const float* x, int64_t T, float* out) const override;
  // The routing forward() uses, for tests.
  void route(const float* x, int64_t T, MoeRouting& out) const;

 private:
  void check_experts(const std::string& name) const;
  GptOssMoeConfig config_;
  Linear router_;
  std::vector<GptOssExpert> experts_;
  std::shared_ptr<std::vector<uint8_t>> owned_;  // storage the experts view, when not the checkpoint's
};

}  // namespace attnzoo
