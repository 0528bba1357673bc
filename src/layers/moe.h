#pragma once
// Sparse mixture of experts (Qwen3-MoE / Qwen3-Next style):
//   logits = router(x);  (experts, weights) = route(logits)          (top-k per token, see MoeRouting)
//   out = sum_j weights_j * expert_{experts_j}(x)  [+ sigmoid(shared_gate(x)) * shared_expert(x)]
// Each expert is a gated MLP. Tokens are grouped per expert so every expert runs its tokens as one GEMM; experts
// run in parallel over the thread pool (each expert's projections then single-threaded inside its task). Each
// (token, slot) result lands in its own row and the slots are summed in order, so results do not depend on
// thread timing.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "layers/block_parts.h"
#include "layers/linear.h"
#include "layers/mlp.h"

namespace attnzoo {

enum class MoeRouter { softmax };  // later: sigmoid with bias correction and groups (DeepSeek-V3)

struct MoeConfig {
  int64_t top_k = 1;
  MoeRouter router = MoeRouter::softmax;
  bool normalize_top_k = false;  // renormalize the chosen weights to sum to 1 (norm_topk_prob)
};

// The experts chosen for each token, [T, top_k] each, slots in descending weight.
struct MoeRouting {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

// Runs every routed (token, slot) through its expert, grouped so each expert sees its tokens as one GEMM, and
// writes out[t] = sum over slots of weight * expert(x[t]) (in slot order: thread timing cannot change it);
// accumulate: add to out instead of overwriting it (after a shared expert wrote there).
// Expert: GatedMlp or PlainMlp (instantiated for both in moe.cc).
template <class Expert>
void run_routed_experts(const std::vector<Expert>& experts, const MoeRouting& routing, int64_t top_k,
                        const float* x, int64_t T, float* out, bool accumulate);

// The same for experts that are not a FeedForward (gpt-oss's clamped SwiGLU with biases):
// run_expert(e, in, n, res) computes expert e on n gathered rows, in and res [n, hidden].
using RunExpert = std::function<void(int32_t e, const float* in, int64_t n, float* res)>;
void run_routed_experts(int64_t num_experts, int64_t hidden, const RunExpert& run_expert, const MoeRouting& routing,
                        int64_t top_k, const float* x, int64_t T, float* out, bool accumulate);

// Softmax over the E router logits of each token, then the top_k largest probabilities (ties to the lower
// expert index, as torch.topk on CPU), renormalized when `normalize`.
void route_softmax_top_k(const float* logits, int64_t T, int64_t E, int64_t top_k, bool normalize, MoeRouting& out);

class SparseMoe : public FeedForward {
 public:
  // router [E, hidden]; experts: E gated MLPs of one hidden size; shared_gate [1, hidden] (only with a shared
  // expert; absent: the shared expert's output is added ungated). Errors name `name`.
  SparseMoe(const MoeConfig& config, Linear router, std::vector<GatedMlp> experts, std::optional<GatedMlp> shared_expert,
            std::optional<Linear> shared_gate, const std::string& name);

  int64_t num_experts() const { return int64_t(experts_.size()); }
  const MoeConfig& config() const { return config_; }
  const Linear& router() const { return router_; }
  const std::vector<GatedMlp>& experts() const { return experts_; }
  const std::optional<GatedMlp>& shared_expert() const { return shared_expert_; }
  const std::optional<Linear>& shared_gate() const { return shared_gate_; }
  uint64_t weight_bytes() const override;
  // Weight bytes one token streams: router, top_k experts and the shared expert.
  uint64_t active_weight_bytes() const;
  uint64_t decode_weight_bytes() const override { return active_weight_bytes(); }
  void forward(const float* x, int64_t T, float* out) const override;
  // The routing forward() uses, for tests.
  void route(const float* x, int64_t T, MoeRouting& out) const;

 private:
  MoeConfig config_;
  Linear router_;
  std::vector<GatedMlp> experts_;
  std::optional<GatedMlp> shared_expert_;
  std::optional<Linear> shared_gate_;
};

}  // namespace attnzoo
