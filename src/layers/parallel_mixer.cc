#include "layers/parallel_mixer.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace attnzoo {
namespace {

// While a branch runs, each sequence's slot for this layer holds that branch's own state (the branch mixers
// look their state up there); the ParallelState sits in the branch's place meanwhile. The guard swaps back even
// when the branch throws.
class BranchStates {
 public:
  BranchStates(const Batch& batch, const std::vector<ParallelState*>& owners, int64_t layer_index, size_t branch)
      : batch_(batch), owners_(owners), layer_(size_t(layer_index)), branch_(branch) {
    swap_all();
  }
  ~BranchStates() { swap_all(); }
  BranchStates(const BranchStates&) = delete;
  BranchStates& operator=(const BranchStates&) = delete;

 private:
  void swap_all() {
    for (size_t s = 0; s < owners_.size(); ++s)
      std::swap(batch_.sequences[s]->layers[layer_], owners_[s]->parts[branch_]);
  }
  const Batch& batch_;
  const std::vector<ParallelState*>& owners_;
  size_t layer_, branch_;
};

}  // namespace

ParallelMixer::ParallelMixer(int64_t hidden, std::vector<ParallelBranch> branches)
    : hidden_(hidden), branches_(std::move(branches)) {
  require(hidden > 0, "hidden", "must be positive");
  require(!branches_.empty(), "branches", "needs at least one mixer");
  for (const auto& b : branches_) require(b.mixer != nullptr, "branches", "holds a null mixer");
}

CacheSpec ParallelMixer::cache_spec() const {
  std::vector<CacheSpec> specs;
  for (const auto& b : branches_) specs.push_back(b.mixer->cache_spec());
  return combine(specs);
}

CacheSpec ParallelMixer::combine(const std::vector<CacheSpec>& branch_specs) {
  CacheSpec spec;
  bool unbounded = false;
  for (const CacheSpec& s : branch_specs) {
    spec.kind += (spec.kind.empty() ? "" : "+") + s.kind;
    spec.bytes_per_token += s.bytes_per_token;
    spec.fixed_bytes += s.fixed_bytes;
    if (s.bytes_per_token > 0) {
      spec.block_tokens = std::max(spec.block_tokens, s.block_tokens);
      unbounded = unbounded || s.max_tokens == 0;
      spec.max_tokens = std::max(spec.max_tokens, s.max_tokens);
    }
  }
  if (unbounded) spec.max_tokens = 0;
  return spec;
}

std::unique_ptr<LayerState> ParallelMixer::new_state() const {
  auto s = std::make_unique<ParallelState>();
  for (const auto& b : branches_) s->parts.push_back(b.mixer->new_state());
  return s;
}

uint64_t ParallelMixer::weight_bytes() const {
  uint64_t w = 0;
  for (const auto& b : branches_) w += b.mixer->weight_bytes();
  return w;
}

std::string ParallelMixer::kind() const {
  std::vector<std::string> kinds;
  for (const auto& b : branches_) kinds.push_back(b.mixer->kind());
  return join_kinds(kinds);
}

std::string ParallelMixer::join_kinds(const std::vector<std::string>& branch_kinds) {
  std::string k;
  for (const auto& b : branch_kinds) k += (k.empty() ? "" : "+") + b;
  return k;
}

int64_t ParallelMixer::window() const {
  int64_t w = 0;
  for (const auto& b : branches_) w = std::max(w, b.mixer->window());
  return w;
}

namespace {
std::vector<ParallelState*> owners_of(const Batch& batch, int64_t layer_index) {
  std::vector<ParallelState*> owners;
  for (SequenceState* s : batch.sequences)
    owners.push_back(static_cast<ParallelState*>(s->layers[size_t(layer_index)].get()));
  return owners;
}
}  // namespace

void ParallelMixer::trace(const float* x, const Batch& batch, int64_t layer_index, LayerTrace& out) const {
  const int64_t n = batch.num_tokens() * hidden_;
  const std::vector<ParallelState*> owners = owners_of(batch, layer_index);
  for (size_t i = 0; i < branches_.size(); ++i) {
    const ParallelBranch& b = branches_[i];
    std::vector<float> scaled(x, x + n);
    for (float& v : scaled) v *= b.in_scale;
    LayerTrace t;
    {
      BranchStates guard(batch, owners, layer_index, i);
      b.mixer->trace(scaled.data(), batch, layer_index, t);
    }
    if (!t.q.empty()) {
      std::vector<float> norms = std::move(out.state_norms);
      out = std::move(t);
      out.state_norms = std::move(norms);
    } else if (!t.state_norms.empty()) {
      out.state_norms = std::move(t.state_norms);
    }
  }
  out.kind = kind();
}

void ParallelMixer::forward(const float* x, const Batch& batch, int64_t layer_index, float* out) const {
  const int64_t n = batch.num_tokens() * hidden_;
  const std::vector<ParallelState*> owners = owners_of(batch, layer_index);
  std::vector<float> scaled, y(static_cast<size_t>(n));
  std::fill(out, out + n, 0.f);
  for (size_t i = 0; i < branches_.size(); ++i) {
    const ParallelBranch& b = branches_[i];
    const float* in = x;
    if (b.in_scale != 1.f) {
      scaled.assign(x, x + n);
      for (float& v : scaled) v *= b.in_scale;
      in = scaled.data();
    }
    {
      BranchStates guard(batch, owners, layer_index, i);
      b.mixer->forward(in, batch, layer_index, y.data());
    }
    for (int64_t k = 0; k < n; ++k) out[k] += b.out_scale * y[size_t(k)];
  }
}

}  // namespace attnzoo
