#pragma once
// Several sequence mixers reading the same normed input side by side, their outputs summed (Falcon-H1: softmax
// attention and Mamba-2 in every layer):
//   out = sum_i out_scale_i * mixer_i(in_scale_i * x)
// The per-sequence state is a ParallelState holding each branch's own state (a KV cache and an SSM state, say),
// so each branch runs its normal forward on its own memory.
#include <memory>
#include <string>
#include <vector>

#include "layers/block_parts.h"

namespace attnzoo {

class ParallelState : public LayerState {
 public:
  std::vector<std::unique_ptr<LayerState>> parts;  // one per branch, in branch order
  int64_t bytes() const override {
    int64_t b = 0;
    for (const auto& p : parts) b += p ? p->bytes() : 0;
    return b;
  }
};

struct ParallelBranch {
  std::unique_ptr<SequenceMixer> mixer;
  float in_scale = 1.f, out_scale = 1.f;
};

class ParallelMixer : public SequenceMixer {
 public:
  // hidden: the width of x and of every branch's output.
  ParallelMixer(int64_t hidden, std::vector<ParallelBranch> branches);

  // Byte counts add up; kinds are joined with '+' ("kv+ssm_state"). Tokens are rounded to the growing branch's
  // blocks, so the sum is exact when at most one branch grows with the sequence (Falcon-H1: the KV cache).
  CacheSpec cache_spec() const override;
  // The same combination over branch specs / kinds given without weights (config-only `inspect`).
  static CacheSpec combine(const std::vector<CacheSpec>& branch_specs);
  static std::string join_kinds(const std::vector<std::string>& branch_kinds);
  std::unique_ptr<LayerState> new_state() const override;
  uint64_t weight_bytes() const override;
  std::string kind() const override;  // the branches' kinds joined with '+'
  int64_t window() const override;
  void forward(const float* x, const Batch& batch, int64_t layer_index, float* out) const override;
  // Each branch's trace merged: q/k from an attention branch, state norms from a recurrent one.
  void trace(const float* x, const Batch& batch, int64_t layer_index, LayerTrace& out) const override;

  const std::vector<ParallelBranch>& branches() const { return branches_; }

 private:
  int64_t hidden_;
  std::vector<ParallelBranch> branches_;
};

}  // namespace attnzoo
