#include "layers/gpt_oss_moe.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/error.h"
#include "core/threads.h"

namespace attnzoo {
namespace {

std::string dims(std::initializer_list<int64_t> shape) {
  std::string s = "[";
  for (int64_t d : shape) s += (s.size() > 1 ? ", " : "") + std::to_string(d);
  return s + "]";
}

void check_tensor(const TensorView& t, std::initializer_list<int64_t> shape, const std::string& name) {
  require(!t.empty(), name.c_str(), "missing");
  bool ok = t.ndim == int(shape.size());
  int i = 0;
  for (int64_t d : shape) ok = ok && t.shape[size_t(i++)] == d;
  require(ok, name.c_str(), "expected " + dims(shape) + ", got " + t.shape_str());
  require(t.is_contiguous(), name.c_str(), "must be contiguous");
  if (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16)
    throw DTypeError(name + ": dtype " + dtype_name(t.dtype) + " is not f32, bf16 or f16");
}

}  // namespace

void gpt_oss_clamped_swiglu(const float* gate, const float* up, float alpha, float limit, float* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    h[i] = (u + 1.f) * (g / (1.f + std::exp(-alpha * g)));
  }
}

void route_top_k_softmax(const float* logits, int64_t T, int64_t E, int64_t top_k, MoeRouting& out) {
  out.experts.assign(size_t(T * top_k), 0);
  out.weights.assign(size_t(T * top_k), 0.f);
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits + t * E;
    for (int64_t e = 0; e < E; ++e) order[size_t(e)] = int32_t(e);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                      [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    const float mx = l[order[0]];  // the largest chosen logit
    double sum = 0;
    for (int64_t j = 0; j < top_k; ++j) sum += std::exp(double(l[order[size_t(j)]] - mx));
    for (int64_t j = 0; j < top_k; ++j) {
      const int32_t e = order[size_t(j)];
      out.experts[size_t(t * top_k + j)] = e;
      out.weights[size_t(t * top_k + j)] = float(std::exp(double(l[e] - mx)) / sum);
    }
  }
}

GptOssMoe::GptOssMoe(const GptOssMoeConfig& config, Linear router, const GptOssExpertTensors& experts, DType store,
                     const std::string& name)
    : config_(config), router_(std::move(router)) {
  const int64_t E = router_.out_features(), H = router_.in_features();
  require(E > 0, (name + ".router.weight").c_str(), "needs at least one expert");
  const std::string x = name + ".experts.";
  require(experts.gate_up.ndim == 3, (x + "gate_up_proj").c_str(), "expected [E, hidden, 2I], got " + experts.gate_up.shape_str());
  const int64_t I2 = experts.gate_up.shape[2], I = I2 / 2;
  require(I2 > 0 && I2 % 2 == 0, (x + "gate_up_proj").c_str(), "last dimension must be even and positive");
  check_tensor(experts.gate_up, {E, H, I2}, x + "gate_up_proj");
  check_tensor(experts.gate_up_bias, {E, I2}, x + "gate_up_proj_bias");
  check_tensor(experts.down, {E, I, H}, x + "down_proj");
  check_tensor(experts.down_bias, {E, H}, x + "down_proj_bias");
  require(store == DType::f32 || store == DType::bf16, "weights", "are held as f32 or bf16");

  // bf16 stays bf16 (exact); f32 stays f32 unless bf16 storage was asked for; f16 widens to f32 (as Linear).
  const bool to_bf16 = experts.gate_up.dtype == DType::bf16 || store == DType::bf16;
  const bool down_bf16 = experts.down.dtype == DType::bf16 || store == DType::bf16;
  const DType gu_t = to_bf16 ? DType::bf16 : DType::f32, dn_t = down_bf16 ? DType::bf16 : DType::f32;
  const size_t gu_bytes = size_t(I2 * H) * dtype_size(gu_t), dn_bytes = size_t(H * I) * dtype_size(dn_t);
  owned_ = std::make_shared<std::vector<uint8_t>>(size_t(E) * (gu_bytes + dn_bytes));
  uint8_t* base = owned_->data();
  // One expert per task: the transposes are plain strided copies, independent across experts.
  ThreadPool::global().parallel_for(E, [&](int64_t e, int) {
    const TensorView& gu = experts.gate_up;
    const int64_t gu_off = e * H * I2;
    void* gu_dst = base + size_t(e) * (gu_bytes + dn_bytes);
    for (int64_t r = 0; r < I2; ++r) {  // destination row r <- source column (gate i at 2i, up i at 2i + 1)
      const int64_t col = r < I ? 2 * r : 2 * (r - I) + 1;
      for (int64_t h = 0; h < H; ++h)
        store_from_f32(gu_dst, gu_t, r * H + h, load_as_f32(gu.data, gu.dtype, gu_off + h * I2 + col));
    }
    const TensorView& dn = experts.down;
    const int64_t dn_off = e * I * H;
    void* dn_dst = base + size_t(e) * (gu_bytes + dn_bytes) + gu_bytes;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < I; ++i)
        store_from_f32(dn_dst, dn_t, h * I + i, load_as_f32(dn.data, dn.dtype, dn_off + i * H + h));
  });
  std::vector<float> g_bias(static_cast<size_t>(I)), u_bias(static_cast<size_t>(I)), dn_bias(static_cast<size_t>(H));
  auto view = [](const void* p, DType t, std::initializer_list<int64_t> shape) {
    return TensorView::contiguous(const_cast<void*>(p), t, shape);
  };
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t i = 0; i < I; ++i) {
      g_bias[size_t(i)] = load_as_f32(experts.gate_up_bias.data, experts.gate_up_bias.dtype, e * I2 + 2 * i);
      u_bias[size_t(i)] = load_as_f32(experts.gate_up_bias.data, experts.gate_up_bias.dtype, e * I2 + 2 * i + 1);
    }
    for (int64_t h = 0; h < H; ++h)
      dn_bias[size_t(h)] = load_as_f32(experts.down_bias.data, experts.down_bias.dtype, e * H + h);
    uint8_t* p = base + size_t(e) * (gu_bytes + dn_bytes);
    const std::string en = x + std::to_string(e);
    experts_.push_back(
        {Linear::from_weights(view(p, gu_t, {I, H}), view(g_bias.data(), DType::f32, {I}), en + ".gate", store),
         Linear::from_weights(view(p + gu_bytes / 2, gu_t, {I, H}), view(u_bias.data(), DType::f32, {I}), en + ".up",
                              store),
         Linear::from_weights(view(p + gu_bytes, dn_t, {H, I}), view(dn_bias.data(), DType::f32, {H}), en + ".down",
                              store)});
  }
  check_experts(name);
}

GptOssMoe::GptOssMoe(const GptOssMoeConfig& config, Linear router, std::vector<GptOssExpert> experts,
                     std::shared_ptr<std::vector<uint8_t>> owned, const std::string& name)
    : config_(config), router_(std::move(router)), experts_(std::move(experts)), owned_(std::move(owned)) {
  check_experts(name);
}

void GptOssMoe::check_experts(const std::string& name) const {
  const int64_t E = router_.out_features(), H = router_.in_features();
  require(E > 0 && int64_t(experts_.size()) == E, (name + ".router.weight").c_str(),
          "has " + std::to_string(E) + " rows for " + std::to_string(experts_.size()) + " experts");
  require(config_.top_k >= 1 && config_.top_k <= E, "num_experts_per_tok",
          "must be in [1, " + std::to_string(E) + "], got " + std::to_string(config_.top_k));
  require(config_.limit > 0, "swiglu_limit", "must be positive");
  const int64_t I = experts_[0].gate.out_features();
  for (int64_t e = 0; e < E; ++e) {
    const GptOssExpert& x = experts_[size_t(e)];
    const std::string en = name + ".experts." + std::to_string(e);
    x.gate.require_shape(I, H, en + ".gate");
    x.up.require_shape(I, H, en + ".up");
    x.down.require_shape(H, I, en + ".down");
  }
}

namespace {
uint64_t expert_bytes(const GptOssExpert& x) {
  return x.gate.weight_bytes() + x.up.weight_bytes() + x.down.weight_bytes();
}
}  // namespace

uint64_t GptOssMoe::weight_bytes() const {
  uint64_t b = router_.weight_bytes();
  for (const GptOssExpert& x : experts_) b += expert_bytes(x);
  return b;
}

uint64_t GptOssMoe::decode_weight_bytes() const {
  return router_.weight_bytes() + uint64_t(config_.top_k) * expert_bytes(experts_[0]);
}

void GptOssMoe::route(const float* x, int64_t T, MoeRouting& out) const {
  const int64_t E = num_experts();
  std::vector<float> logits(size_t(T * E));
  router_.forward(x, T, logits.data());
  route_top_k_softmax(logits.data(), T, E, config_.top_k, out);
}

void GptOssMoe::forward(const float* x, int64_t T, float* out) const {
  const int64_t E = num_experts(), H = hidden(), I = intermediate(), k = config_.top_k;
  MoeRouting routing;
  route(x, T, routing);

  run_routed_experts(
      E, H,
      [&](int32_t e, const float* in, int64_t n, float* res) {
        const GptOssExpert& ex = experts_[size_t(e)];
        std::vector<float> g(size_t(n * I)), u(size_t(n * I)), h(size_t(n * I));
        Linear::forward_shared({{&ex.gate, g.data()}, {&ex.up, u.data()}}, in, n);
        for (int64_t r = 0; r < n; ++r)
          gpt_oss_clamped_swiglu(g.data() + r * I, u.data() + r * I, config_.alpha, config_.limit, h.data() + r * I, I);
        ex.down.forward(h.data(), n, res);
      },
      routing, k, x, T, out, /*accumulate=*/false);
}

}  // namespace attnzoo
