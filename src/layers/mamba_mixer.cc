#include "layers/mamba_mixer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/linear/common/ssm_args.h"
#include "kernels/linear/mamba/mamba.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "layers/norm.h"
#include "layers/sequence_schedule.h"

namespace attnzoo {
namespace {

// Transpose tile: 32 floats are two cache lines on each side, and 32 x 32 floats (4 KiB) sit in L1.
constexpr int64_t kTransposeTile = 32;

std::vector<float> widen(const TensorView& t, std::initializer_list<int64_t> shape, const std::string& name) {
  require(!t.empty(), name.c_str(), "is required");
  std::string want = "[";
  for (int64_t s : shape) want += (want.size() > 1 ? ", " : "") + std::to_string(s);
  const bool ok = t.ndim == int(shape.size()) && std::equal(shape.begin(), shape.end(), t.shape.begin());
  require(ok && t.is_contiguous(), name.c_str(), "expected " + want + "], got " + t.shape_str());
  return ssm::to_f32_vector(t);
}

TensorView f32_view(const float* p, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(const_cast<float*>(p), DType::f32, shape);
}

}  // namespace

void rows_to_channels(const float* src, int64_t src_stride, int64_t n, int64_t cols, float* dst) {
  const int64_t tiles = (cols + kTransposeTile - 1) / kTransposeTile;
  ThreadPool::global().parallel_for(tiles, [&](int64_t tile, int) {
    const int64_t c0 = tile * kTransposeTile, c1 = std::min(cols, c0 + kTransposeTile);
    for (int64_t t0 = 0; t0 < n; t0 += kTransposeTile) {
      const int64_t t1 = std::min(n, t0 + kTransposeTile);
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t t = t0; t < t1; ++t) dst[c * n + t] = src[t * src_stride + c];
    }
  });
}

void channels_to_rows(const float* src, int64_t n, int64_t cols, float* dst, int64_t dst_stride) {
  const int64_t tiles = (n + kTransposeTile - 1) / kTransposeTile;
  ThreadPool::global().parallel_for(tiles, [&](int64_t tile, int) {
    const int64_t t0 = tile * kTransposeTile, t1 = std::min(n, t0 + kTransposeTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTransposeTile) {
      const int64_t c1 = std::min(cols, c0 + kTransposeTile);
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t c = c0; c < c1; ++c) dst[t * dst_stride + c] = src[c * n + t];
    }
  });
}

MambaMixer::MambaMixer(const MambaMixerConfig& config, MambaMixerWeights weights, const std::string& name)
    : config_(config), w_(std::move(weights)) {
  const auto& c = config_;
  require(c.hidden > 0 && c.inner > 0 && c.state_size > 0 && c.dt_rank > 0, "mamba",
          "hidden, inner, state_size and dt_rank must be positive");
  require(c.conv_kernel >= 1 && c.conv_kernel <= 16, "conv_kernel", "must be in [1, 16]");
  w_.in_proj.require_shape(2 * c.inner, c.hidden, name + ".in_proj.weight");
  w_.x_proj.require_shape(c.x_proj_dim(), c.inner, name + ".x_proj.weight");
  w_.dt_proj.require_shape(c.inner, c.dt_rank, name + ".dt_proj.weight");
  require(!w_.dt_proj.has_bias(), (name + ".dt_proj").c_str(),
          "pass the bias as dt_bias (it is added inside the scan, before softplus)");
  w_.out_proj.require_shape(c.hidden, c.inner, name + ".out_proj.weight");
  conv_weight_ = depthwise_conv_weight(w_.conv_weight, w_.conv_bias, c.inner, c.conv_kernel, name);
  A_ = widen(w_.A_log, {c.inner, c.state_size}, name + ".A_log");
  for (float& a : A_) a = -std::exp(a);
  D_ = widen(w_.D, {c.inner}, name + ".D");
  dt_bias_ = widen(w_.dt_bias, {c.inner}, name + ".dt_proj.bias");
  auto norm_weight = [&](const TensorView& t, int64_t n, const char* tensor) {
    require(c.bcdt_rms_norm || t.empty(), (name + "." + tensor).c_str(), "given without bcdt_rms_norm");
    return t.empty() ? std::vector<float>(size_t(n), 1.f) : widen(t, {n}, name + "." + tensor);
  };
  dt_norm_ = norm_weight(w_.dt_norm, c.dt_rank, "dt_layernorm.weight");
  b_norm_ = norm_weight(w_.b_norm, c.state_size, "b_layernorm.weight");
  c_norm_ = norm_weight(w_.c_norm, c.state_size, "c_layernorm.weight");
}

CacheSpec MambaMixer::spec(const MambaMixerConfig& c) {
  return conv_state_spec(checked_mul(c.inner, c.conv_state_len(), "conv state"),
                         checked_mul(c.inner, c.state_size, "state"));
}

uint64_t MambaMixer::weight_bytes() const {
  uint64_t b = w_.in_proj.weight_bytes() + w_.x_proj.weight_bytes() + w_.dt_proj.weight_bytes() +
               w_.out_proj.weight_bytes();
  b += uint64_t(conv_weight_.numel()) * dtype_size(conv_weight_.dtype);
  const size_t norms = w_.dt_norm.empty() ? 0 : dt_norm_.size() + b_norm_.size() + c_norm_.size();
  return b + (A_.size() + D_.size() + dt_bias_.size() + norms) * sizeof(float);
}

void MambaMixer::forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const {
  const auto& c = config_;
  const int64_t T = batch.num_tokens(), nseq = batch.num_sequences();
  if (T == 0) return;
  const int64_t E = c.inner, N = c.state_size, R = c.dt_rank, XP = c.x_proj_dim(), S = c.conv_state_len();
  std::vector<ConvStateSlot> states;
  for (int64_t s = 0; s < nseq; ++s) states.push_back(conv_state_slot(memory, batch, s, E * S));

  std::vector<float> proj(size_t(T * 2 * E));  // [T, x | z]
  w_.in_proj.forward(x, T, proj.data());

  // Causal conv over x for the whole ragged batch in one call: the conv tails are gathered into one
  // [nseq, E, S] block and scattered back.
  std::vector<float> xin(size_t(T * E)), xc(size_t(T * E)), tails(size_t(nseq * E * S));
  for (int64_t t = 0; t < T; ++t)
    std::memcpy(xin.data() + t * E, proj.data() + t * 2 * E, size_t(E) * sizeof(float));
  for (int64_t s = 0; s < nseq; ++s)
    std::memcpy(tails.data() + s * E * S, states[size_t(s)].conv, size_t(E * S) * sizeof(float));
  CausalConv1dOptions co;
  co.bias = w_.conv_bias;
  co.initial_state = co.final_state = f32_view(tails.data(), {nseq, E, S});
  co.activation = ConvActivation::silu;
  co.cu_seqlens = batch.cu_seqlens.data();
  co.cu_seqlens_len = int64_t(batch.cu_seqlens.size());
  causal_conv1d(f32_view(xin.data(), {1, T, E}), conv_weight_, f32_view(xc.data(), {1, T, E}), co);
  for (int64_t s = 0; s < nseq; ++s)
    std::memcpy(states[size_t(s)].conv, tails.data() + s * E * S, size_t(E * S) * sizeof(float));

  // [dt_low | B | C] per token; Falcon-Mamba and Jamba normalise each of the three.
  std::vector<float> xdbl(size_t(T * XP));
  w_.x_proj.forward(xc.data(), T, xdbl.data());
  if (c.bcdt_rms_norm) {
    rms_norm(xdbl.data(), T, R, XP, dt_norm_.data(), c.mixer_rms_eps, xdbl.data(), XP);
    rms_norm(xdbl.data() + R, T, N, XP, b_norm_.data(), c.mixer_rms_eps, xdbl.data() + R, XP);
    rms_norm(xdbl.data() + R + N, T, N, XP, c_norm_.data(), c.mixer_rms_eps, xdbl.data() + R + N, XP);
  }
  std::vector<float> dt_low(size_t(T * R)), dt(size_t(T * E));
  for (int64_t t = 0; t < T; ++t)
    std::memcpy(dt_low.data() + t * R, xdbl.data() + t * XP, size_t(R) * sizeof(float));
  w_.dt_proj.forward(dt_low.data(), T, dt.data());

  // The scan, per sequence on its own state, updated in place (the kernel reads each channel block's state
  // before writing it back). Prompt pieces are transposed to the scan's channel-major layout into `work`,
  // which only the one-sequence-at-a-time (non-decode) schedule uses.
  int64_t longest = 0;
  for (int64_t s = 0; s < nseq; ++s) longest = std::max(longest, batch.seq_len(s));
  std::vector<float> work(longest > 1 ? size_t((4 * E + 2 * N) * longest) : 0);
  std::vector<float> y(size_t(T * E));
  const TensorView A = f32_view(A_.data(), {E, N}), D = f32_view(D_.data(), {E});
  const TensorView dt_bias = f32_view(dt_bias_.data(), {E});
  auto scan = [&](int64_t s) {
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
    if (n == 0) return;
    const TensorView state = f32_view(states[size_t(s)].state, {1, E, N});
    const float* row = xdbl.data() + b * XP;
    if (n == 1) {
      SelectiveStateUpdateArgs a;
      a.state = state;
      a.x = f32_view(xc.data() + b * E, {1, E});
      a.dt = f32_view(dt.data() + b * E, {1, E});
      a.A = A, a.D = D, a.dt_bias = dt_bias, a.dt_softplus = true;
      a.B = f32_view(row + R, {1, N});
      a.C = f32_view(row + R + N, {1, N});
      a.z = f32_view(proj.data() + b * 2 * E + E, {1, E});
      a.y = f32_view(y.data() + b * E, {1, E});
      selective_state_update(a);
      return;
    }
    float *u = work.data(), *delta = u + E * n, *z = delta + E * n, *o = z + E * n, *Bc = o + E * n, *Cc = Bc + N * n;
    rows_to_channels(xc.data() + b * E, E, n, E, u);
    rows_to_channels(dt.data() + b * E, E, n, E, delta);
    rows_to_channels(proj.data() + b * 2 * E + E, 2 * E, n, E, z);
    rows_to_channels(row + R, XP, n, N, Bc);
    rows_to_channels(row + R + N, XP, n, N, Cc);
    SelectiveScanArgs a;
    a.u = f32_view(u, {1, E, n});
    a.delta = f32_view(delta, {1, E, n});
    a.A = A, a.D = D, a.delta_bias = dt_bias, a.delta_softplus = true;
    a.B = f32_view(Bc, {1, N, n});
    a.C = f32_view(Cc, {1, N, n});
    a.z = f32_view(z, {1, E, n});
    a.initial_state = a.final_state = state;
    a.out = f32_view(o, {1, E, n});
    selective_scan(a);
    channels_to_rows(o, n, E, y.data() + b * E, E);
  };
  for_each_sequence(batch, 1, scan);

  w_.out_proj.forward(y.data(), T, out);
}

void MambaMixer::trace(const float*, const Batch& batch, const LayerMemory& memory, LayerTrace& out) const {
  out.kind = kind();
  if (batch.num_sequences() < 1) return;
  const ConvStateSlot st = conv_state_slot(memory, batch, 0, config_.inner * config_.conv_state_len());
  out.state_norms = head_state_norms(st.state, config_.inner, config_.state_size);
}

}  // namespace attnzoo
