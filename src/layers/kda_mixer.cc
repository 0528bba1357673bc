#include "layers/kda_mixer.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/linear/common/ssm_args.h"
#include "kernels/linear/kda/kda.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "layers/gated_deltanet_mixer.h"
#include "layers/linear_prefill_mode.h"
#include "layers/sequence_schedule.h"

namespace attnzoo {
KdaMixer::KdaMixer(const KdaConfig& config, KdaWeights weights, const std::string& name)
    : config_(config), w_(std::move(weights)) {
  const auto& c = config_;
  require(c.hidden > 0 && c.num_heads > 0 && c.head_dim > 0, "kda", "hidden, num_heads and head_dim must be positive");
  require(c.conv_kernel >= 1 && c.conv_kernel <= 16, "short_conv_kernel_size", "must be in [1, 16]");
  const int64_t D = c.qkv_dim(), K = c.head_dim, W = c.conv_kernel;
  w_.q_proj.require_shape(D, c.hidden, name + ".q_proj.weight");
  w_.k_proj.require_shape(D, c.hidden, name + ".k_proj.weight");
  w_.v_proj.require_shape(D, c.hidden, name + ".v_proj.weight");
  w_.f_a_proj.require_shape(K, c.hidden, name + ".f_a_proj.weight");
  w_.f_b_proj.require_shape(D, K, name + ".f_b_proj.weight");
  w_.b_proj.require_shape(c.num_heads, c.hidden, name + ".b_proj.weight");
  w_.g_a_proj.require_shape(K, c.hidden, name + ".g_a_proj.weight");
  w_.g_b_proj.require_shape(D, K, name + ".g_b_proj.weight");
  w_.o_proj.require_shape(c.hidden, D, name + ".o_proj.weight");
  require(!w_.q_proj.has_bias() && !w_.k_proj.has_bias() && !w_.v_proj.has_bias(), (name + ".q_proj").c_str(),
          "q/k/v projections must have no bias");
  const char* conv_names[3] = {".q_conv1d.weight", ".k_conv1d.weight", ".v_conv1d.weight"};
  const TensorView* convs[3] = {&w_.q_conv, &w_.k_conv, &w_.v_conv};
  conv_weight_.reserve(size_t(c.conv_dim() * W));
  for (int i = 0; i < 3; ++i) {
    const TensorView& cw = *convs[i];
    const bool ok = (cw.ndim == 3 && cw.shape[0] == D && cw.shape[1] == 1 && cw.shape[2] == W) ||
                    (cw.ndim == 2 && cw.shape[0] == D && cw.shape[1] == W);
    require(ok && cw.is_contiguous(), (name + conv_names[i]).c_str(),
            "expected [" + std::to_string(D) + ", 1, " + std::to_string(W) + "], got " + cw.shape_str());
    const std::vector<float> f = ssm::to_f32_vector(cw);
    conv_weight_.insert(conv_weight_.end(), f.begin(), f.end());
  }
  neg_A_ = widen_vector(w_.A_log, c.num_heads, name + ".A_log");
  for (float& a : neg_A_) a = -std::exp(a);
  dt_bias_ = widen_vector(w_.dt_bias, D, name + ".dt_bias");
  norm_w_ = widen_vector(w_.o_norm_weight, K, name + ".o_norm.weight");
}

CacheSpec KdaMixer::spec(const KdaConfig& c) {
  return conv_state_spec(checked_mul(c.conv_dim(), c.conv_state_len(), "conv state"),
                         checked_mul(checked_mul(c.num_heads, c.head_dim, "state"), c.head_dim, "state"));
}

uint64_t KdaMixer::weight_bytes() const {
  return w_.q_proj.weight_bytes() + w_.k_proj.weight_bytes() + w_.v_proj.weight_bytes() +
         w_.f_a_proj.weight_bytes() + w_.f_b_proj.weight_bytes() + w_.b_proj.weight_bytes() +
         w_.g_a_proj.weight_bytes() + w_.g_b_proj.weight_bytes() + w_.o_proj.weight_bytes() +
         uint64_t(conv_weight_.size()) * sizeof(float);
}

void KdaMixer::forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const {
  const auto& c = config_;
  const int64_t T = batch.num_tokens(), C = c.conv_dim(), D = c.qkv_dim(), H = c.num_heads, K = c.head_dim;
  // [q | k | v] per token, written in place by the three projections (row stride C), then convolved.
  std::vector<float> mixed(size_t(T * C)), conv_out(size_t(T * C));
  // Forget gate (per channel log decay), write strength, and the output gate's input. The six projections of x
  // share one quantization (or bf16 rounding) of it and one dispatch: the same bits as one by one.
  std::vector<float> f_low(size_t(T * K)), g_low(size_t(T * K)), g(size_t(T * D)), beta(size_t(T * H)),
      gate(size_t(T * D));
  Linear::forward_shared({{&w_.q_proj, mixed.data(), C},
                          {&w_.k_proj, mixed.data() + D, C},
                          {&w_.v_proj, mixed.data() + 2 * D, C},
                          {&w_.f_a_proj, f_low.data()},
                          {&w_.b_proj, beta.data()},
                          {&w_.g_a_proj, g_low.data()}},
                         x, T);
  w_.f_b_proj.forward(f_low.data(), T, g.data());
  // Element-wise gates with an exp / log1p each: T * D of them, so split over the pool by tokens.
  auto for_token_blocks = [&](const std::function<void(int64_t)>& per_token) {
    constexpr int64_t kTokensPerTask = 16;
    ThreadPool::global().parallel_for((T + kTokensPerTask - 1) / kTokensPerTask, [&](int64_t task, int) {
      for (int64_t t = task * kTokensPerTask; t < std::min(T, (task + 1) * kTokensPerTask); ++t) per_token(t);
    });
  };
  for_token_blocks([&](int64_t t) {
    for (int64_t j = 0; j < D; ++j) {
      float& v = g[size_t(t * D + j)];
      v = neg_A_[size_t(j / K)] * softplus(v + dt_bias_[size_t(j)]);
    }
    for (int64_t h = 0; h < H; ++h) beta[size_t(t * H + h)] = 1.f / (1.f + std::exp(-beta[size_t(t * H + h)]));
  });
  w_.g_b_proj.forward(g_low.data(), T, gate.data());

  const int64_t Wm1 = c.conv_state_len();
  auto state_of = [&](int64_t s) {
    return conv_state_slot(memory, batch, s, C * Wm1);
  };
  const TensorView conv_w = TensorView::contiguous(const_cast<float*>(conv_weight_.data()), DType::f32, {C, c.conv_kernel});
  std::vector<float> q(size_t(T * D)), k(size_t(T * D)), v(size_t(T * D)), o(size_t(T * D));
  auto conv_sequence = [&](int64_t s) {
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
    if (n == 0) return;
    CausalConv1dOptions opts;
    opts.initial_state = TensorView::contiguous(state_of(s).conv, DType::f32, {1, C, Wm1});
    opts.final_state = opts.initial_state;
    opts.activation = ConvActivation::silu;
    causal_conv1d(TensorView::contiguous(mixed.data() + b * C, DType::f32, {1, n, C}), conv_w,
                  TensorView::contiguous(conv_out.data() + b * C, DType::f32, {1, n, C}), opts);
  };
  auto kda_sequence = [&](int64_t s) {
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
    if (n == 0) return;
    DeltaArgs args;
    args.q = TensorView::contiguous(q.data() + b * D, DType::f32, {1, n, H, K});
    args.k = TensorView::contiguous(k.data() + b * D, DType::f32, {1, n, H, K});
    args.v = TensorView::contiguous(v.data() + b * D, DType::f32, {1, n, H, K});
    args.g = TensorView::contiguous(g.data() + b * D, DType::f32, {1, n, H, K});
    args.beta = TensorView::contiguous(beta.data() + b * H, DType::f32, {1, n, H});
    args.o = TensorView::contiguous(o.data() + b * D, DType::f32, {1, n, H, K});
    args.initial_state = TensorView::contiguous(state_of(s).state, DType::f32, {1, H, K, K});
    args.final_state = args.initial_state;  // the kernels read each head's state before writing it
    args.use_qk_l2norm_in_kernel = true;
    // Inputs are this layer's own projections and the state its own: scanning them for NaN each step would read
    // the whole state a second time (a model that yields NaN shows it in its logits, as in transformers).
    args.check_values = false;
    if (n == 1 || linear_prefill_mode() == LinearPrefillMode::recurrent)
      recurrent_kda(args);
    else
      chunk_kda(args);
  };
  for_each_sequence(batch, 1, conv_sequence);
  for_token_blocks([&](int64_t t) {
    const float* row = conv_out.data() + t * C;
    std::copy_n(row, D, q.data() + t * D);
    std::copy_n(row + D, D, k.data() + t * D);
    std::copy_n(row + 2 * D, D, v.data() + t * D);
  });
  for_each_sequence(batch, 1, kda_sequence);

  // KimiLinearRMSNormGated: rmsnorm per head, times w, then times sigmoid(gate).
  for_token_blocks([&](int64_t t) {
    for (int64_t r = t * H; r < (t + 1) * H; ++r) {
      float* y = o.data() + r * K;
      const float* z = gate.data() + r * K;
      double ss = 0;
      for (int64_t i = 0; i < K; ++i) ss += double(y[i]) * y[i];
      const float inv = float(1.0 / std::sqrt(ss / double(K) + double(c.norm_eps)));
      for (int64_t i = 0; i < K; ++i) y[i] = y[i] * inv * norm_w_[size_t(i)] * (1.f / (1.f + std::exp(-z[i])));
    }
  });
  w_.o_proj.forward(o.data(), T, out);
}

void KdaMixer::trace(const float*, const Batch& batch, const LayerMemory& memory, LayerTrace& out) const {
  const auto& c = config_;
  out.kind = kind();
  if (batch.num_sequences() < 1) return;
  const ConvStateSlot st = conv_state_slot(memory, batch, 0, c.conv_dim() * c.conv_state_len());
  out.state_norms = head_state_norms(st.state, c.num_heads, c.head_dim * c.head_dim);
}

}  // namespace attnzoo
