#include "layers/rwkv7_time_mix.h"

#include <algorithm>
#include <cmath>

#include "core/convert.h"
#include "core/error.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "layers/linear_prefill_mode.h"
#include "layers/rwkv7_state.h"
#include "layers/sequence_schedule.h"

namespace attnzoo {
namespace {

constexpr float kDecayScale = -0.6065306597126334f;  // -exp(-0.5): fla's w = kDecayScale * sigmoid(w_lora)

float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

std::vector<float> widen(const TensorView& t, int64_t n, const std::string& name) {
  require(t.numel() == n && t.is_contiguous(), name.c_str(),
          "expected " + std::to_string(n) + " values, got shape " + t.shape_str());
  std::vector<float> out(static_cast<size_t>(n));
  convert_to_f32(t.data, t.dtype, out.data(), out.size());
  return out;
}

void check_lora(const Rwkv7Lora& l, int64_t hidden, int64_t out, const std::string& name) {
  require(l.down.in_features() == hidden, (name + ".lora.0.weight").c_str(),
          "expected [rank, " + std::to_string(hidden) + "], got " + l.down.shape_str());
  l.up.require_shape(out, l.down.out_features(), name + ".lora.2.weight");
}

enum class LoraActivation { none, tanh, sigmoid };

// y [T, out] = up(act(down(x))).
void lora_forward(const Rwkv7Lora& l, LoraActivation act, const float* x, int64_t T, float* y) {
  std::vector<float> h(size_t(T * l.down.out_features()));
  l.down.forward(x, T, h.data());
  if (act == LoraActivation::tanh)
    for (float& v : h) v = std::tanh(v);
  if (act == LoraActivation::sigmoid)
    for (float& v : h) v = sigmoid(v);
  l.up.forward(h.data(), T, y);
}

}  // namespace

Rwkv7TimeMix::Rwkv7TimeMix(const Rwkv7TimeMixConfig& config, Rwkv7TimeMixWeights weights, const std::string& name)
    : c_(config), w_(std::move(weights)) {
  const int64_t C = c_.hidden, Dv = c_.value_dim();
  require(C > 0 && c_.num_heads > 0 && c_.head_dim > 0 && c_.head_v_dim > 0 && c_.num_heads * c_.head_dim == C,
          name.c_str(), "hidden must equal num_heads * head_dim, all positive");
  const TensorView* mixes[6] = {&w_.x_r, &w_.x_w, &w_.x_k, &w_.x_v, &w_.x_a, &w_.x_g};
  const char* mix_names[6] = {".x_r", ".x_w", ".x_k", ".x_v", ".x_a", ".x_g"};
  for (int i = 0; i < 6; ++i) mix_[i] = widen(*mixes[i], C, name + mix_names[i]);
  k_k_ = widen(w_.k_k, C, name + ".k_k");
  k_a_ = widen(w_.k_a, C, name + ".k_a");
  r_k_ = widen(w_.r_k, C, name + ".r_k");
  w_.r_proj.require_shape(C, C, name + ".r_proj.weight");
  w_.k_proj.require_shape(C, C, name + ".k_proj.weight");
  w_.v_proj.require_shape(Dv, C, name + ".v_proj.weight");
  w_.o_proj.require_shape(C, Dv, name + ".o_proj.weight");
  check_lora(w_.w_lora, C, C, name + ".w_lora");
  check_lora(w_.a_lora, C, C, name + ".a_lora");
  check_lora(w_.g_lora, C, Dv, name + ".g_lora");
  if (w_.v_lora) check_lora(*w_.v_lora, C, Dv, name + ".v_lora");
  g_norm_ = LayerNorm(w_.g_norm_weight, w_.g_norm_bias, float(c_.head_dim) * c_.norm_eps, name + ".g_norm",
                      c_.num_heads);
  require(g_norm_.dim() == Dv, (name + ".g_norm.weight").c_str(),
          "expected " + std::to_string(Dv) + " values, got " + std::to_string(g_norm_.dim()));
}

uint64_t Rwkv7TimeMix::weight_bytes() const {
  uint64_t b = w_.r_proj.weight_bytes() + w_.k_proj.weight_bytes() + w_.v_proj.weight_bytes() +
               w_.o_proj.weight_bytes();
  for (const Rwkv7Lora* l : {&w_.w_lora, &w_.a_lora, &w_.g_lora}) b += l->down.weight_bytes() + l->up.weight_bytes();
  if (w_.v_lora) b += w_.v_lora->down.weight_bytes() + w_.v_lora->up.weight_bytes();
  return b;
}

void Rwkv7TimeMix::forward(const float* x, const Batch& batch, const LayerMemory& memory, float* v_first,
                           float* out) const {
  const int64_t T = batch.num_tokens(), C = c_.hidden, Dv = c_.value_dim();
  const int64_t H = c_.num_heads, K = c_.head_dim, V = c_.head_v_dim;
  auto state_of = [&](int64_t s) {
    return Rwkv7State(memory, batch, s, C);
  };
  std::vector<float> delta(size_t(T * C)), mixed(size_t(T * C));
  rwkv7_token_shift(x, batch, C, [&](int64_t s) { return state_of(s).attn_shift(); }, delta.data());
  // Each mixed input is consumed by its projection right away, so one buffer serves all six.
  auto mix = [&](int c) {
    const float* m = mix_[c].data();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < C; ++i) mixed[size_t(t * C + i)] = x[t * C + i] + delta[size_t(t * C + i)] * m[i];
    return mixed.data();
  };
  std::vector<float> r(size_t(T * C)), w(size_t(T * C)), k(size_t(T * C)), a(size_t(T * C)), kk(size_t(T * C));
  std::vector<float> v(size_t(T * Dv)), g(size_t(T * Dv)), o(size_t(T * Dv));
  w_.r_proj.forward(mix(0), T, r.data());
  lora_forward(w_.w_lora, LoraActivation::tanh, mix(1), T, w.data());
  for (float& e : w) e = kDecayScale * sigmoid(e);
  w_.k_proj.forward(mix(2), T, k.data());
  w_.v_proj.forward(mix(3), T, v.data());
  if (!w_.v_lora) {
    std::copy(v.begin(), v.end(), v_first);
  } else {
    lora_forward(*w_.v_lora, LoraActivation::none, mixed.data(), T, o.data());  // o as scratch
    for (int64_t i = 0; i < T * Dv; ++i) v[size_t(i)] += sigmoid(o[size_t(i)]) * (v_first[i] - v[size_t(i)]);
  }
  lora_forward(w_.a_lora, LoraActivation::none, mix(4), T, a.data());
  for (float& e : a) e = sigmoid(e);
  lora_forward(w_.g_lora, LoraActivation::sigmoid, mix(5), T, g.data());

  rwkv7_prepare_keys(k.data(), a.data(), kk.data(), k_k_.data(), k_a_.data(), T, H, K, c_.fused_l2norm);

  for_each_sequence(batch, 1, [&](int64_t s) {
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
    if (n == 0) return;
    Rwkv7Args args;
    args.r = TensorView::contiguous(r.data() + b * C, DType::f32, {1, n, H, K});
    args.w = TensorView::contiguous(w.data() + b * C, DType::f32, {1, n, H, K});
    args.k = TensorView::contiguous(k.data() + b * C, DType::f32, {1, n, H, K});
    args.a = TensorView::contiguous(kk.data() + b * C, DType::f32, {1, n, H, K});
    args.b = TensorView::contiguous(a.data() + b * C, DType::f32, {1, n, H, K});
    args.v = TensorView::contiguous(v.data() + b * Dv, DType::f32, {1, n, H, V});
    args.o = TensorView::contiguous(o.data() + b * Dv, DType::f32, {1, n, H, V});
    args.scale = 1.f;
    args.initial_state = TensorView::contiguous(state_of(s).wkv(), DType::f32, {1, H, K, V});
    args.final_state = args.initial_state;  // the kernel reads each head's state before writing it
    // `attnzoo bench model --linear-prefill=recurrent` forces the token loop to measure what the chunked kernel buys.
    if (n == 1 || linear_prefill_mode() == LinearPrefillMode::recurrent)
      recurrent_rwkv7(args);
    else
      chunk_rwkv7(args, 64);
  });

  g_norm_.forward(o.data(), T, o.data());
  rwkv7_bonus_gate(o.data(), r.data(), k.data(), r_k_.data(), v.data(), g.data(), T, H, K, V);
  w_.o_proj.forward(o.data(), T, out);
}

void rwkv7_prepare_keys(float* k, float* a, float* kk, const float* k_k, const float* k_a, int64_t T, int64_t H,
                        int64_t K, bool fused_l2norm) {
  for (int64_t th = 0; th < T * H; ++th) {
    const int64_t base = th * K, c0 = (th % H) * K;
    float ss = 0.f;
    for (int64_t i = 0; i < K; ++i) {
      kk[base + i] = k[base + i] * k_k[c0 + i];
      ss += kk[base + i] * kk[base + i];
    }
    const float inv = fused_l2norm ? 1.f / std::sqrt(ss + 1e-6f) : 1.f / std::max(std::sqrt(ss), 1e-12f);
    for (int64_t i = 0; i < K; ++i) {
      const int64_t j = base + i;
      const float kn = kk[j] * inv, ai = a[j];
      k[j] = k[j] * (1.f + (ai - 1.f) * k_a[c0 + i]);  // the in-context learning rate's update
      a[j] = kn * ai;
      kk[j] = -kn;
    }
  }
}

void rwkv7_bonus_gate(float* o, const float* r, const float* k, const float* r_k, const float* v, const float* g,
                      int64_t T, int64_t H, int64_t K, int64_t V) {
  for (int64_t th = 0; th < T * H; ++th) {
    const int64_t kb = th * K, vb = th * V, c0 = (th % H) * K;
    float bonus = 0.f;
    for (int64_t i = 0; i < K; ++i) bonus += r[kb + i] * k[kb + i] * r_k[c0 + i];
    for (int64_t j = 0; j < V; ++j) o[vb + j] = (o[vb + j] + bonus * v[vb + j]) * g[vb + j];
  }
}

}  // namespace attnzoo
