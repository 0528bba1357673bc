#pragma once
// Several sequence mixers reading the same normed input side by side, their outputs summed (Falcon-H1: softmax
// attention and Mamba-2 in every layer):
//   out = sum_i out_scale_i * mixer_i(in_scale_i * x)
// The layer's pool memory is the union of the branches' (CacheSpec::combine): the one branch with a paged cache
// gets the paged tensors, and each branch with a fixed state gets its own range of every state slot.
#include <memory>
#include <string>
#include <vector>

#include "layers/block_parts.h"

namespace attnzoo {

struct ParallelBranch {
  std::unique_ptr<SequenceMixer> mixer;
  float in_scale = 1.f, out_scale = 1.f;
};

class ParallelMixer : public SequenceMixer {
 public:
  // hidden: the width of x and of every branch's output.
  ParallelMixer(int64_t hidden, std::vector<ParallelBranch> branches);

  CacheSpec cache_spec() const override;
  // The same combination over branch specs / kinds given without weights (config-only `inspect`): at most one
  // branch may have a paged cache; fixed states are laid side by side, each starting on a cache line.
  static CacheSpec combine(const std::vector<CacheSpec>& branch_specs);
  static std::string join_kinds(const std::vector<std::string>& branch_kinds);
  uint64_t weight_bytes() const override;
  std::string kind() const override;  // the branches' kinds joined with '+'
  int64_t window() const override;
  void forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const override;
  // Each branch's trace merged: q/k from an attention branch, state norms from a recurrent one.
  void trace(const float* x, const Batch& batch, const LayerMemory& memory, LayerTrace& out) const override;

  const std::vector<ParallelBranch>& branches() const { return branches_; }

 private:
  // Branch i's share of the layer's memory.
  LayerMemory branch_memory(const LayerMemory& memory, size_t i) const;
  int64_t hidden_;
  std::vector<ParallelBranch> branches_;
  std::vector<int64_t> state_offsets_;  // where each branch's state starts inside a slot
};

}  // namespace attnzoo
