#include "layers/moe.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/threads.h"
#include "layers/linear_observer.h"

namespace attnzoo {

void route_softmax_top_k(const float* logits, int64_t T, int64_t E, int64_t top_k, bool normalize, MoeRouting& out) {
  out.experts.assign(size_t(T * top_k), 0);
  out.weights.assign(size_t(T * top_k), 0.f);
  std::vector<float> p(static_cast<size_t>(E));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits + t * E;
    const float mx = *std::max_element(l, l + E);
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += (p[size_t(e)] = std::exp(l[e] - mx));
    for (int64_t e = 0; e < E; ++e) p[size_t(e)] = float(p[size_t(e)] / sum);
    for (int64_t e = 0; e < E; ++e) order[size_t(e)] = int32_t(e);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
      return p[size_t(a)] > p[size_t(b)] || (p[size_t(a)] == p[size_t(b)] && a < b);
    });
    double chosen = 0;
    for (int64_t j = 0; j < top_k; ++j) chosen += p[size_t(order[size_t(j)])];
    for (int64_t j = 0; j < top_k; ++j) {
      const int32_t e = order[size_t(j)];
      out.experts[size_t(t * top_k + j)] = e;
      out.weights[size_t(t * top_k + j)] = normalize ? float(p[size_t(e)] / chosen) : p[size_t(e)];
    }
  }
}

SparseMoe::SparseMoe(const MoeConfig& config, Linear router, std::vector<GatedMlp> experts,
                     std::optional<GatedMlp> shared_expert, std::optional<Linear> shared_gate, const std::string& name)
    : config_(config), router_(std::move(router)), experts_(std::move(experts)),
      shared_expert_(std::move(shared_expert)), shared_gate_(std::move(shared_gate)) {
  const int64_t E = num_experts();
  require(E > 0, (name + ".experts").c_str(), "needs at least one expert");
  const int64_t H = experts_[0].hidden();
  require(config_.top_k >= 1 && config_.top_k <= E, "num_experts_per_tok",
          "must be in [1, " + std::to_string(E) + "], got " + std::to_string(config_.top_k));
  require(router_.out_features() == E && router_.in_features() == H, (name + ".gate.weight").c_str(),
          "expected [" + std::to_string(E) + ", " + std::to_string(H) + "], got " + router_.shape_str());
  for (int64_t e = 0; e < E; ++e)
    require(experts_[size_t(e)].hidden() == H, (name + ".experts." + std::to_string(e)).c_str(),
            "hidden size differs from expert 0's");
  if (shared_expert_)
    require(shared_expert_->hidden() == H, (name + ".shared_expert").c_str(), "hidden size differs from the experts'");
  if (shared_gate_) {
    require(shared_expert_.has_value(), (name + ".shared_expert_gate").c_str(), "given without a shared expert");
    require(shared_gate_->out_features() == 1 && shared_gate_->in_features() == H,
            (name + ".shared_expert_gate.weight").c_str(),
            "expected [1, " + std::to_string(H) + "], got " + shared_gate_->shape_str());
  }
}

uint64_t SparseMoe::weight_bytes() const {
  uint64_t b = router_.weight_bytes();
  for (const auto& e : experts_) b += e.weight_bytes();
  if (shared_expert_) b += shared_expert_->weight_bytes();
  if (shared_gate_) b += shared_gate_->weight_bytes();
  return b;
}

uint64_t SparseMoe::active_weight_bytes() const {
  uint64_t b = router_.weight_bytes() + uint64_t(config_.top_k) * experts_[0].weight_bytes();
  if (shared_expert_) b += shared_expert_->weight_bytes();
  if (shared_gate_) b += shared_gate_->weight_bytes();
  return b;
}

void SparseMoe::route(const float* x, int64_t T, MoeRouting& out) const {
  const int64_t E = num_experts();
  std::vector<float> logits(size_t(T * E));
  router_.forward(x, T, logits.data());
  route_softmax_top_k(logits.data(), T, E, config_.top_k, config_.normalize_top_k, out);
}

void run_routed_experts(int64_t num_experts, int64_t hidden, const RunExpert& run_expert, const MoeRouting& routing,
                        int64_t k, const float* x, int64_t T, float* out, bool accumulate) {
  const int64_t E = num_experts, H = hidden;
  std::vector<std::vector<int64_t>> assigned(static_cast<size_t>(E));  // entries: t * k + slot
  for (int64_t i = 0; i < T * k; ++i) assigned[size_t(routing.experts[size_t(i)])].push_back(i);
  std::vector<int32_t> active;
  for (int64_t e = 0; e < E; ++e)
    if (!assigned[size_t(e)].empty()) active.push_back(int32_t(e));

  std::vector<float> slots(size_t(T * k * H));  // each (token, slot)'s weighted expert output
  auto run_active = [&](int64_t a) {
    const int32_t e = active[size_t(a)];
    const auto& rows = assigned[size_t(e)];
    const int64_t n = int64_t(rows.size());
    std::vector<float> in(size_t(n * H)), res(size_t(n * H));
    for (int64_t r = 0; r < n; ++r) std::copy_n(x + (rows[size_t(r)] / k) * H, H, in.data() + r * H);
    run_expert(e, in.data(), n, res.data());
    for (int64_t r = 0; r < n; ++r) {
      const float w = routing.weights[size_t(rows[size_t(r)])];
      float* dst = slots.data() + rows[size_t(r)] * H;
      for (int64_t i = 0; i < H; ++i) dst[i] = w * res[size_t(r * H + i)];
    }
  };
  // Enough busy experts to fill the pool: one task each. Otherwise experts in turn, each GEMM using the pool; so
  // too while a calibration observer is installed: it belongs to this thread, and an expert run on a worker would
  // give its Linears no importance (which experts did was up to the scheduler).
  const int64_t A = int64_t(active.size());
  if (A >= ThreadPool::global().num_threads() && !linear_input_observer())
    ThreadPool::global().parallel_for(A, [&](int64_t a, int) { run_active(a); });
  else
    for (int64_t a = 0; a < A; ++a) run_active(a);
  if (!accumulate) std::fill(out, out + T * H, 0.f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const float* src = slots.data() + (t * k + j) * H;
      for (int64_t i = 0; i < H; ++i) out[t * H + i] += src[i];
    }
}

template <class Expert>
void run_routed_experts(const std::vector<Expert>& experts, const MoeRouting& routing, int64_t k, const float* x,
                        int64_t T, float* out, bool accumulate) {
  run_routed_experts(
      int64_t(experts.size()), experts[0].hidden(),
      [&](int32_t e, const float* in, int64_t n, float* res) { experts[size_t(e)].forward(in, n, res); }, routing, k,
      x, T, out, accumulate);
}

template void run_routed_experts(const std::vector<GatedMlp>&, const MoeRouting&, int64_t, const float*, int64_t,
                                 float*, bool);
template void run_routed_experts(const std::vector<PlainMlp>&, const MoeRouting&, int64_t, const float*, int64_t,
                                 float*, bool);

void SparseMoe::forward(const float* x, int64_t T, float* out) const {
  const int64_t H = experts_[0].hidden(), k = config_.top_k, E = num_experts();
  MoeRouting routing;
  if (!shared_expert_) {
    route(x, T, routing);
  } else {
    // The router and the shared gate ride in the shared expert's gate / up call: one quantization of x for all.
    std::vector<float> logits(size_t(T * E)), gate(static_cast<size_t>(T));
    const Linear::SharedOutput beside[2] = {{&router_, logits.data()},
                                            {shared_gate_ ? &*shared_gate_ : nullptr, gate.data()}};
    shared_expert_->forward(x, T, out, std::span<const Linear::SharedOutput>(beside, shared_gate_ ? 2 : 1));
    route_softmax_top_k(logits.data(), T, E, config_.top_k, config_.normalize_top_k, routing);
    if (shared_gate_) {
      for (int64_t t = 0; t < T; ++t) {
        const float s = 1.f / (1.f + std::exp(-gate[size_t(t)]));
        for (int64_t i = 0; i < H; ++i) out[t * H + i] *= s;
      }
    }
  }
  run_routed_experts(experts_, routing, k, x, T, out, /*accumulate=*/shared_expert_.has_value());
}

}  // namespace attnzoo
