#include "layers/parallel_mixer.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/error.h"
#include "kernels/quant/quant_input_scope.h"
#include "layers/linear.h"

namespace attnzoo {
ParallelMixer::ParallelMixer(int64_t hidden, std::vector<ParallelBranch> branches)
    : hidden_(hidden), branches_(std::move(branches)) {
  require(hidden > 0, "hidden", "must be positive");
  require(!branches_.empty(), "branches", "needs at least one mixer");
  for (const auto& b : branches_) require(b.mixer != nullptr, "branches", "holds a null mixer");
  int64_t offset = 0;
  for (const auto& b : branches_) {
    state_offsets_.push_back(offset);
    offset += (b.mixer->cache_spec().state_floats + 15) / 16 * 16;
  }
}

LayerMemory ParallelMixer::branch_memory(const LayerMemory& memory, size_t i) const {
  const CacheSpec spec = branches_[i].mixer->cache_spec();
  LayerMemory m;
  if (spec.paged()) {
    m.k = memory.k;
    m.v = memory.v;
    m.k_scale = memory.k_scale;
    m.v_scale = memory.v_scale;
  }
  if (spec.state_floats > 0) {
    m.states = memory.states + state_offsets_[i];
    m.state_stride = memory.state_stride;
  }
  return m;
}

CacheSpec ParallelMixer::cache_spec() const {
  std::vector<CacheSpec> specs;
  for (const auto& b : branches_) specs.push_back(b.mixer->cache_spec());
  return combine(specs);
}

CacheSpec ParallelMixer::combine(const std::vector<CacheSpec>& branch_specs) {
  CacheSpec spec = branch_specs.at(0);
  spec.state_floats = (spec.state_floats + 15) / 16 * 16;
  for (size_t i = 1; i < branch_specs.size(); ++i) {
    CacheSpec padded = branch_specs[i];
    padded.state_floats = (padded.state_floats + 15) / 16 * 16;
    spec = CacheSpec::combine(spec, padded);
  }
  return spec;
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

void ParallelMixer::trace(const float* x, const Batch& batch, const LayerMemory& memory, LayerTrace& out) const {
  const int64_t n = batch.num_tokens() * hidden_;
  for (size_t i = 0; i < branches_.size(); ++i) {
    const ParallelBranch& b = branches_[i];
    std::vector<float> scaled(x, x + n);
    for (float& v : scaled) v *= b.in_scale;
    LayerTrace t;
    b.mixer->trace(scaled.data(), batch, branch_memory(memory, i), t);
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

void ParallelMixer::forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const {
  const int64_t T = batch.num_tokens(), n = T * hidden_;
  std::vector<float> scaled, y(static_cast<size_t>(n));
  std::fill(out, out + n, 0.f);
  // Branches of one input scale read the same rows: their input projections (attention's q / k / v, Mamba-2's
  // in_proj), separate calls, share one 8-bit quantization of them. Scales that differ (Falcon-H1-0.5B's 1 and
  // 1.25) give rows whose 8-bit quantizations differ, not only by the scale: each branch quantizes its own.
  bool one_input = true;
  for (const auto& b : branches_) one_input = one_input && b.in_scale == branches_[0].in_scale;
  std::optional<QuantInputScope> shared;
  for (size_t i = 0; i < branches_.size(); ++i) {
    const ParallelBranch& b = branches_[i];
    const float* in = x;
    if (b.in_scale != 1.f) {
      if (i == 0 || !one_input) {
        scaled.assign(x, x + n);
        for (float& v : scaled) v *= b.in_scale;
      }
      in = scaled.data();
    }
    if (i == 0 && one_input && branches_.size() > 1 && Linear::sharing()) shared.emplace(in, T, hidden_);
    b.mixer->forward(in, batch, branch_memory(memory, i), y.data());
    for (int64_t k = 0; k < n; ++k) out[k] += b.out_scale * y[size_t(k)];
  }
}

}  // namespace attnzoo
