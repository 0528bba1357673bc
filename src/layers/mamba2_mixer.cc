#include "layers/mamba2_mixer.h"

#include <algorithm>
#include <cstring>

#include "core/checked.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "layers/activations.h"
#include "layers/linear_prefill_mode.h"
#include "layers/norm.h"
#include "layers/sequence_schedule.h"

namespace attnzoo {
namespace {

// Prompt chunks at least this long go through the chunked SSD scan (tile products); shorter ones step the
// recurrence token by token, which is cheaper when there is little to amortise the chunk set-up over.
constexpr int64_t kMinChunkScanTokens = 16;

}  // namespace

Mamba2Mixer::Mamba2Mixer(const Mamba2MixerConfig& config, Mamba2MixerWeights weights, const std::string& name)
    : config_(config), w_(std::move(weights)) {
  const auto& c = config_;
  require(c.hidden > 0 && c.num_heads > 0 && c.head_dim > 0 && c.state_size > 0, "mamba2",
          "hidden, heads, head_dim and state_size must be positive");
  require(c.n_groups > 0 && c.num_heads % c.n_groups == 0, "n_groups",
          "must divide the head count " + std::to_string(c.num_heads) + ", got " + std::to_string(c.n_groups));
  require(c.conv_kernel >= 1 && c.conv_kernel <= 16, "conv_kernel", "must be in [1, 16]");
  require(!c.gated_norm || (c.norm_groups > 0 && c.inner() % c.norm_groups == 0), "norm_groups",
          "must divide the inner size " + std::to_string(c.inner()));
  require(c.proj_multipliers.empty() || int64_t(c.proj_multipliers.size()) == c.proj_dim(), "proj_multipliers",
          "needs one value per in_proj output (" + std::to_string(c.proj_dim()) + ")");
  w_.in_proj.require_shape(c.proj_dim(), c.hidden, name + ".in_proj.weight");
  w_.out_proj.require_shape(c.hidden, c.inner(), name + ".out_proj.weight");
  conv_weight_ = depthwise_conv_weight(w_.conv_weight, w_.conv_bias, c.conv_dim(), c.conv_kernel, name);
  A_ = widen_vector(w_.A_log, c.num_heads, name + ".A_log");
  for (float& a : A_) a = -std::exp(a);
  D_ = widen_vector(w_.D, c.num_heads, name + ".D");
  dt_bias_ = widen_vector(w_.dt_bias, c.num_heads, name + ".dt_bias");
  if (c.gated_norm) norm_w_ = widen_vector(w_.norm_weight, c.inner(), name + ".norm.weight");
}

CacheSpec Mamba2Mixer::spec(const Mamba2MixerConfig& c) {
  return conv_state_spec(checked_mul(c.conv_dim(), c.conv_state_len(), "conv state"),
                         checked_mul(checked_mul(c.num_heads, c.head_dim, "state"), c.state_size, "state"));
}

uint64_t Mamba2Mixer::weight_bytes() const {
  uint64_t b = w_.in_proj.weight_bytes() + w_.out_proj.weight_bytes();
  b += uint64_t(conv_weight_.numel()) * dtype_size(conv_weight_.dtype);
  return b + (A_.size() + D_.size() + dt_bias_.size() + norm_w_.size()) * sizeof(float);
}

void Mamba2Mixer::forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const {
  std::vector<ConvStateSlot> states;
  for (int64_t s = 0; s < batch.num_sequences(); ++s)
    states.push_back(conv_state_slot(memory, batch, s, config_.conv_dim() * config_.conv_state_len()));
  const auto& c = config_;
  const int64_t T = batch.num_tokens(), nseq = batch.num_sequences();
  const int64_t E = c.inner(), CD = c.conv_dim(), PD = c.proj_dim(), H = c.num_heads, P = c.head_dim;
  const int64_t G = c.n_groups, N = c.state_size, GN = G * N, S = c.conv_state_len();
  ThreadPool& pool = ThreadPool::global();

  std::vector<float> proj(size_t(T * PD));
  w_.in_proj.forward(x, T, proj.data());
  if (!c.proj_multipliers.empty())
    pool.parallel_for(T, [&](int64_t t, int) {
      float* row = proj.data() + t * PD;
      for (int64_t i = 0; i < PD; ++i) row[i] *= c.proj_multipliers[size_t(i)];
    });

  // Causal conv over xBC for the whole ragged batch in one call: the (small) conv tails are gathered into one
  // [nseq, CD, S] block and scattered back.
  std::vector<float> xbc(size_t(T * CD)), conv_out(size_t(T * CD)), dt(size_t(T * H)), tails(size_t(nseq * CD * S));
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(xbc.data() + t * CD, proj.data() + t * PD + E, size_t(CD) * sizeof(float));
    std::memcpy(dt.data() + t * H, proj.data() + t * PD + E + CD, size_t(H) * sizeof(float));
  }
  for (int64_t s = 0; s < nseq; ++s)
    std::memcpy(tails.data() + s * CD * S, states[size_t(s)].conv, size_t(CD * S) * sizeof(float));
  CausalConv1dOptions co;
  co.bias = w_.conv_bias;
  co.initial_state = co.final_state = TensorView::contiguous(tails.data(), DType::f32, {nseq, CD, S});
  co.activation = ConvActivation::silu;
  co.cu_seqlens = batch.cu_seqlens.data();
  co.cu_seqlens_len = int64_t(batch.cu_seqlens.size());
  causal_conv1d(TensorView::contiguous(xbc.data(), DType::f32, {1, T, CD}), conv_weight_,
                TensorView::contiguous(conv_out.data(), DType::f32, {1, T, CD}), co);
  for (int64_t s = 0; s < nseq; ++s)
    std::memcpy(states[size_t(s)].conv, tails.data() + s * CD * S, size_t(CD * S) * sizeof(float));

  // x / B / C as contiguous [T, ...] blocks for the scan kernels (reusing xbc's storage for x).
  std::vector<float> Bm(size_t(T * GN)), Cm(size_t(T * GN));
  float* xs = xbc.data();
  for (int64_t t = 0; t < T; ++t) {
    const float* row = conv_out.data() + t * CD;
    std::memcpy(xs + t * E, row, size_t(E) * sizeof(float));
    std::memcpy(Bm.data() + t * GN, row + E, size_t(GN) * sizeof(float));
    std::memcpy(Cm.data() + t * GN, row + E + GN, size_t(GN) * sizeof(float));
  }

  // The SSM scan, per sequence on its own state (updated in place: both kernels read a head's state fully
  // before writing it back).
  std::vector<float> y(size_t(T * E));
  const TensorView A = TensorView::contiguous(const_cast<float*>(A_.data()), DType::f32, {H});
  const TensorView D = TensorView::contiguous(const_cast<float*>(D_.data()), DType::f32, {H});
  const TensorView dt_bias = TensorView::contiguous(const_cast<float*>(dt_bias_.data()), DType::f32, {H});
  const bool limit = c.dt_min > 0.f || std::isfinite(c.dt_max);
  auto scan = [&](int64_t s) {
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
    if (n == 0) return;
    const TensorView state = TensorView::contiguous(states[size_t(s)].state, DType::f32, {1, H, P, N});
    if (n == 1) {
      Mamba2StepArgs a;
      a.state = state;
      a.x = TensorView::contiguous(xs + b * E, DType::f32, {1, H, P});
      a.dt = TensorView::contiguous(dt.data() + b * H, DType::f32, {1, H});
      a.A = A, a.D = D, a.dt_bias = dt_bias;
      a.B = TensorView::contiguous(Bm.data() + b * GN, DType::f32, {1, G, N});
      a.C = TensorView::contiguous(Cm.data() + b * GN, DType::f32, {1, G, N});
      a.dt_softplus = true, a.dt_limit = limit, a.dt_min = c.dt_min, a.dt_max = c.dt_max;
      a.y = TensorView::contiguous(y.data() + b * E, DType::f32, {1, H, P});
      mamba2_state_update(a);
      return;
    }
    Mamba2Args a;
    a.x = TensorView::contiguous(xs + b * E, DType::f32, {1, n, H, P});
    a.dt = TensorView::contiguous(dt.data() + b * H, DType::f32, {1, n, H});
    a.A = A, a.D = D, a.dt_bias = dt_bias;
    a.B = TensorView::contiguous(Bm.data() + b * GN, DType::f32, {1, n, G, N});
    a.C = TensorView::contiguous(Cm.data() + b * GN, DType::f32, {1, n, G, N});
    a.dt_softplus = true, a.dt_limit = limit, a.dt_min = c.dt_min, a.dt_max = c.dt_max;
    a.initial_state = a.final_state = state;
    a.y = TensorView::contiguous(y.data() + b * E, DType::f32, {1, n, H, P});
    if (n >= kMinChunkScanTokens && linear_prefill_mode() == LinearPrefillMode::chunked)
      mamba2_chunk_scan(a);
    else
      mamba2_recurrent(a);
  };
  for_each_sequence(batch, 1, scan);

  gate_and_norm(proj.data(), T, y.data());
  w_.out_proj.forward(y.data(), T, out);
}

void Mamba2Mixer::trace(const float*, const Batch& batch, const LayerMemory& memory, LayerTrace& out) const {
  const auto& c = config_;
  out.kind = kind();
  if (batch.num_sequences() < 1) return;
  const ConvStateSlot st = conv_state_slot(memory, batch, 0, c.conv_dim() * c.conv_state_len());
  out.state_norms = head_state_norms(st.state, c.num_heads, c.head_dim * c.state_size);
}

void Mamba2Mixer::gate_and_norm(const float* proj, int64_t T, float* y) const {
  const auto& c = config_;
  const int64_t E = c.inner(), PD = c.proj_dim();
  if (c.gated_norm) {
    gated_rms_norm(y, proj, T, E, PD, c.norm_groups, norm_w_.data(), c.norm_eps, c.norm_before_gate);
    return;
  }
  ThreadPool::global().parallel_for(T, [&](int64_t t, int) {
    gated_activation(Activation::silu, proj + t * PD, y + t * E, y + t * E, E);
  });
}

void gated_rms_norm(float* y, const float* z, int64_t rows, int64_t inner, int64_t z_stride, int64_t groups,
                    const float* w, float eps, bool norm_before_gate) {
  const int64_t gs = inner / groups;
  ThreadPool::global().parallel_for(rows, [&](int64_t r, int) {
    float* yr = y + r * inner;
    const float* zr = z + r * z_stride;
    if (!norm_before_gate) gated_activation(Activation::silu, zr, yr, yr, inner);
    for (int64_t g = 0; g < groups; ++g) rms_norm(yr + g * gs, 1, gs, gs, w + g * gs, eps, yr + g * gs, gs);
    if (norm_before_gate) gated_activation(Activation::silu, zr, yr, yr, inner);
  });
}


void gated_rms_norm_reference(float* y, const float* z, int64_t rows, int64_t inner, int64_t z_stride,
                              int64_t groups, const float* w, float eps, bool norm_before_gate) {
  const int64_t gs = inner / groups;
  auto silu = [](double v) { return v / (1.0 + std::exp(-v)); };
  std::vector<double> v(static_cast<size_t>(inner));
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * inner;
    const float* zr = z + r * z_stride;
    for (int64_t i = 0; i < inner; ++i) v[size_t(i)] = norm_before_gate ? yr[i] : yr[i] * silu(zr[i]);
    for (int64_t g = 0; g < groups; ++g) {
      double ss = 0;
      for (int64_t i = g * gs; i < (g + 1) * gs; ++i) ss += v[size_t(i)] * v[size_t(i)];
      const double inv = 1.0 / std::sqrt(ss / double(gs) + eps);
      for (int64_t i = g * gs; i < (g + 1) * gs; ++i) v[size_t(i)] *= inv * w[i];
    }
    for (int64_t i = 0; i < inner; ++i) yr[i] = float(norm_before_gate ? v[size_t(i)] * silu(zr[i]) : v[size_t(i)]);
  }
}

}  // namespace attnzoo
