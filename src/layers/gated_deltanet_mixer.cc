#include "layers/gated_deltanet_mixer.h"

#include "layers/linear_prefill_mode.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "layers/mamba2_mixer.h"
#include "layers/sequence_schedule.h"

namespace attnzoo {
std::vector<ProjectionRun> qwen3_next_in_proj_runs(const GatedDeltaNetConfig& c) {
  const int64_t H = c.num_k_heads, K = c.head_k_dim, r = c.num_v_heads / c.num_k_heads, V = c.head_v_dim;
  const int64_t group = 2 * K + 2 * r * V;  // one key head's slice of in_proj_qkvz
  std::vector<ProjectionRun> runs;
  for (int64_t h = 0; h < H; ++h) runs.push_back({0, h * group, K});                      // q
  for (int64_t h = 0; h < H; ++h) runs.push_back({0, h * group + K, K});                  // k
  for (int64_t h = 0; h < H; ++h) runs.push_back({0, h * group + 2 * K, r * V});          // v
  for (int64_t h = 0; h < H; ++h) runs.push_back({0, h * group + 2 * K + r * V, r * V});  // z
  for (int64_t h = 0; h < H; ++h) runs.push_back({1, h * 2 * r, r});                      // b
  for (int64_t h = 0; h < H; ++h) runs.push_back({1, h * 2 * r + r, r});                  // a
  return runs;
}

std::vector<ProjectionRun> qwen3_next_split_in_proj_runs(const GatedDeltaNetConfig& c) {
  const int64_t H = c.num_k_heads, r = c.num_v_heads / c.num_k_heads;
  std::vector<ProjectionRun> runs = {{0, 0, c.conv_dim()}, {1, 0, c.value_dim()}};
  for (int64_t h = 0; h < H; ++h) runs.push_back({2, h * 2 * r, r});      // b
  for (int64_t h = 0; h < H; ++h) runs.push_back({2, h * 2 * r + r, r});  // a
  return runs;
}

std::vector<ProjectionRun> qwen3_5_in_proj_runs(const GatedDeltaNetConfig& c) {
  return {{0, 0, c.conv_dim()}, {1, 0, c.value_dim()}, {2, 0, c.num_v_heads}, {3, 0, c.num_v_heads}};
}

GatedDeltaNetMixer::GatedDeltaNetMixer(const GatedDeltaNetConfig& config, GatedDeltaNetWeights weights,
                                       const std::string& name)
    : config_(config), w_(std::move(weights)) {
  const auto& c = config_;
  require(c.hidden > 0 && c.num_k_heads > 0 && c.num_v_heads > 0 && c.head_k_dim > 0 && c.head_v_dim > 0,
          "gated_deltanet", "hidden, head counts and head dims must be positive");
  require(c.num_v_heads % c.num_k_heads == 0, "linear_num_value_heads",
          "must be a multiple of linear_num_key_heads (" + std::to_string(c.num_k_heads) + "), got " +
              std::to_string(c.num_v_heads));
  require(c.conv_kernel >= 1 && c.conv_kernel <= 16, "linear_conv_kernel_dim", "must be in [1, 16]");
  require(!w_.in_proj.empty(), (name + ".in_proj").c_str(), "needs at least one input projection");
  std::vector<int64_t> offsets;
  for (const Linear& l : w_.in_proj) {
    require(l.in_features() == c.hidden, (name + ".in_proj").c_str(),
            "expected weights [*, " + std::to_string(c.hidden) + "], got " + l.shape_str());
    offsets.push_back(in_proj_width_);
    in_proj_width_ += l.out_features();
  }
  int64_t features = 0;
  for (ProjectionRun& run : w_.in_proj_runs) {
    require(run.source >= 0 && run.source < int(w_.in_proj.size()) && run.begin >= 0 && run.count >= 0 &&
                run.begin + run.count <= w_.in_proj[size_t(run.source)].out_features(),
            (name + ".in_proj").c_str(), "a projection run lies outside its source weight");
    run.begin += offsets[size_t(run.source)];  // from here on: a column of the sources' outputs side by side
    features += run.count;
  }
  require(features == c.proj_dim(), (name + ".in_proj").c_str(),
          "the runs give " + std::to_string(features) + " features, expected " + std::to_string(c.proj_dim()));
  // The runs give the features in q k v z b a order; split where a run crosses from one part to the next, so
  // tokens can be scattered straight into the tensors the kernels read.
  const int64_t part_end[4] = {c.conv_dim(), c.conv_dim() + c.value_dim(), c.conv_dim() + c.value_dim() + c.num_v_heads,
                               c.proj_dim()};
  int64_t f = 0;
  for (const ProjectionRun& run : w_.in_proj_runs) {
    for (int64_t done = 0; done < run.count;) {
      int part = 0;
      while (f >= part_end[part]) ++part;
      const int64_t n = std::min(run.count - done, part_end[part] - f);
      run_targets_.push_back({run.begin + done, n, part, f - (part ? part_end[part - 1] : 0)});
      done += n, f += n;
    }
  }
  w_.out_proj.require_shape(c.hidden, c.value_dim(), name + ".out_proj.weight");
  conv_weight_ = depthwise_conv_weight(w_.conv_weight, w_.conv_bias, c.conv_dim(), c.conv_kernel, name);
  neg_A_ = widen_vector(w_.A_log, c.num_v_heads, name + ".A_log");
  for (float& a : neg_A_) a = -std::exp(a);
  dt_bias_ = widen_vector(w_.dt_bias, c.num_v_heads, name + ".dt_bias");
  norm_w_ = widen_vector(w_.norm_weight, c.head_v_dim, name + ".norm.weight");
}

CacheSpec GatedDeltaNetMixer::spec(const GatedDeltaNetConfig& c) {
  return conv_state_spec(checked_mul(c.conv_dim(), c.conv_state_len(), "conv state"),
                         checked_mul(checked_mul(c.num_v_heads, c.head_k_dim, "state"), c.head_v_dim, "state"));
}

uint64_t GatedDeltaNetMixer::weight_bytes() const {
  uint64_t b = 0;
  for (const Linear& l : w_.in_proj) b += l.weight_bytes();
  return b + w_.out_proj.weight_bytes() +
         uint64_t(conv_weight_.numel()) * dtype_size(conv_weight_.dtype);
}

void GatedDeltaNetMixer::forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const {
  const auto& c = config_;
  const int64_t T = batch.num_tokens(), C = c.conv_dim(), HV = c.num_v_heads;
  const int64_t H = c.num_k_heads, K = c.head_k_dim, V = c.head_v_dim, kd = c.key_dim(), vd = c.value_dim();
  // The sources' outputs side by side [T, in_proj_width_], written in place with the row stride (a bias too: every
  // route adds it per row), then each token's runs scattered into the parts. The sources share one quantization
  // (or bf16 rounding) of x and one dispatch, kMaxShared at a time: the same bits as one by one.
  std::vector<float> raw(size_t(T * in_proj_width_));
  std::vector<Linear::SharedOutput> outs;
  int64_t col = 0;
  for (const Linear& l : w_.in_proj) {
    outs.push_back({&l, raw.data() + col, in_proj_width_});
    col += l.out_features();
  }
  for (size_t i = 0; i < outs.size(); i += Linear::kMaxShared)
    Linear::forward_shared(std::span<const Linear::SharedOutput>(outs).subspan(
                               i, std::min(outs.size() - i, size_t(Linear::kMaxShared))),
                           x, T);
  // The kernels want each tensor contiguous: conv input, z, and the gates from b and a (parallel over tokens).
  std::vector<float> mixed(size_t(T * C)), conv_out(size_t(T * C)), z(size_t(T * vd)), g(size_t(T * HV)),
      beta(size_t(T * HV)), ba(size_t(T * 2 * HV));
  constexpr int64_t kTokensPerTask = 16;
  ThreadPool::global().parallel_for((T + kTokensPerTask - 1) / kTokensPerTask, [&](int64_t task, int) {
    for (int64_t t = task * kTokensPerTask; t < std::min(T, (task + 1) * kTokensPerTask); ++t) {
      float* const parts[4] = {mixed.data() + t * C, z.data() + t * vd, ba.data() + t * 2 * HV,
                               ba.data() + t * 2 * HV + HV};
      for (const RunTarget& r : run_targets_)
        std::copy_n(raw.data() + t * in_proj_width_ + r.begin, r.count, parts[r.part] + r.offset);
      const float* b = parts[2];
      const float* a = parts[3];
      for (int64_t h = 0; h < HV; ++h) {
        beta[size_t(t * HV + h)] = 1.f / (1.f + std::exp(-b[h]));
        g[size_t(t * HV + h)] = neg_A_[size_t(h)] * softplus(a[h] + dt_bias_[size_t(h)]);
      }
    }
  });

  const int64_t Wm1 = c.conv_state_len();
  auto state_of = [&](int64_t s) {
    return conv_state_slot(memory, batch, s, C * Wm1);
  };
  std::vector<float> q(size_t(T * kd)), k(size_t(T * kd)), v(size_t(T * vd)), o(size_t(T * vd));
  auto conv_sequence = [&](int64_t s) {
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
    if (n == 0) return;
    CausalConv1dOptions opts;
    opts.bias = w_.conv_bias;
    opts.initial_state = TensorView::contiguous(state_of(s).conv, DType::f32, {1, C, Wm1});
    opts.final_state = opts.initial_state;
    opts.activation = ConvActivation::silu;
    causal_conv1d(TensorView::contiguous(mixed.data() + b * C, DType::f32, {1, n, C}), conv_weight_,
                  TensorView::contiguous(conv_out.data() + b * C, DType::f32, {1, n, C}), opts);
  };
  auto delta_sequence = [&](int64_t s) {
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
    if (n == 0) return;
    DeltaArgs args;
    args.q = TensorView::contiguous(q.data() + b * kd, DType::f32, {1, n, H, K});
    args.k = TensorView::contiguous(k.data() + b * kd, DType::f32, {1, n, H, K});
    args.v = TensorView::contiguous(v.data() + b * vd, DType::f32, {1, n, HV, V});
    args.g = TensorView::contiguous(g.data() + b * HV, DType::f32, {1, n, HV});
    args.beta = TensorView::contiguous(beta.data() + b * HV, DType::f32, {1, n, HV});
    args.o = TensorView::contiguous(o.data() + b * vd, DType::f32, {1, n, HV, V});
    args.initial_state = TensorView::contiguous(state_of(s).state, DType::f32, {1, HV, K, V});
    args.final_state = args.initial_state;  // the kernels read each head's state before writing it
    args.use_qk_l2norm_in_kernel = true;
    // Inputs are this layer's own projections and the state its own: scanning them for NaN each step would read
    // the whole state a second time (a model that yields NaN shows it in its logits, as in transformers).
    args.check_values = false;
    // `attnzoo bench model --linear-prefill=recurrent` forces the token loop to measure what the chunked kernel buys.
    if (n == 1 || linear_prefill_mode() == LinearPrefillMode::recurrent)
      recurrent_gated_delta_rule(args);
    else
      chunk_gated_delta_rule(args);
  };
  for_each_sequence(batch, 1, conv_sequence);
  ThreadPool::global().parallel_for((T + kTokensPerTask - 1) / kTokensPerTask, [&](int64_t task, int) {
    for (int64_t t = task * kTokensPerTask; t < std::min(T, (task + 1) * kTokensPerTask); ++t) {
      const float* row = conv_out.data() + t * C;
      std::copy_n(row, kd, q.data() + t * kd);
      std::copy_n(row + kd, kd, k.data() + t * kd);
      std::copy_n(row + 2 * kd, vd, v.data() + t * vd);
    }
  });
  for_each_sequence(batch, 1, delta_sequence);

  // Norm first, then the gate (Qwen3NextRMSNormGated), per value head.
  gated_rms_norm(o.data(), z.data(), T * HV, V, V, 1, norm_w_.data(), c.norm_eps, /*norm_before_gate=*/true);
  w_.out_proj.forward(o.data(), T, out);
}

void GatedDeltaNetMixer::trace(const float*, const Batch& batch, const LayerMemory& memory, LayerTrace& out) const {
  const auto& c = config_;
  out.kind = kind();
  if (batch.num_sequences() < 1) return;
  const ConvStateSlot st = conv_state_slot(memory, batch, 0, c.conv_dim() * c.conv_state_len());
  out.state_norms = head_state_norms(st.state, c.num_v_heads, c.head_k_dim * c.head_v_dim);
}

}  // namespace attnzoo
