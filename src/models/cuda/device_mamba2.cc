#include "models/cuda/device_mamba2.h"

#include <cmath>
#include <vector>

#include "kernels/linear/mamba2/mamba2.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/row_copy_cuda.h"
#include "layers/linear_prefill_mode.h"
#include "models/cuda/device_conv_state.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots past the attention's and the MLPs' (device_attention.cc, device_mlp.cc).
enum Slot : size_t { kProj = 16, kXbc, kConv, kX, kB, kC, kDt, kY };
static_assert(kY < kDecodePlanSlots, "the step's decode plans own the slots from kDecodePlanSlots on");

// As the CPU mixer: prompts this long take the chunked SSD scan, shorter ones the token-by-token recurrence.
constexpr int64_t kMinChunkScanTokens = 16;

class DeviceMamba2 final : public DeviceMixer {
 public:
  DeviceMamba2(const Mamba2Mixer& m, const DeviceLoad& load, MixerScales scales)
      : c_(m.config()),
        in_(m.in_proj(), load, in_proj_fold(m, scales)),
        out_(m.out_proj(), load, WeightFold::output(scales.out)),
        conv_(m.conv_weight(), m.conv_bias(), c_.conv_kernel, ConvActivation::silu, load) {
    A_ = upload_f32(m.A(), load);
    D_ = upload_f32(m.D(), load);
    dt_bias_ = upload_f32(m.dt_bias(), load);
    if (c_.gated_norm) norm_w_ = upload_f32(m.norm_weight(), load);
    // Falcon-H1's muP vector over in_proj's outputs, where in_proj's weights could not fold it, is constant per
    // section (z, x, B, C, dt): one scale per run.
    const std::vector<float>& mult = foldable(m.in_proj().matrix().type) ? std::vector<float>{} : c_.proj_multipliers;
    for (size_t i = 0; i < mult.size();) {
      size_t n = 1;
      while (i + n < mult.size() && mult[i + n] == mult[i]) ++n;
      if (mult[i] != 1.f) proj_scales_.push_back({int64_t(i), int64_t(n), mult[i]});
      i += n;
    }
  }

  // in_proj's multipliers folded into its rows, the input one into every weight, where its weights go up as 16-bit
  // rows (in(scale * x) * mult = (mult * scale * W) x + mult * b).
  static WeightFold in_proj_fold(const Mamba2Mixer& m, MixerScales scales) {
    if (!foldable(m.in_proj().matrix().type)) return {};
    return {scales.in, 1.f, m.config().proj_multipliers};
  }

  // A decode step runs in place in the pool's slots with nothing uploaded of its own (device_conv_state.h).
  bool replayable() const override { return true; }

  void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const override {
    const int64_t T = step.num_tokens;
    const int64_t E = c_.inner(), CD = c_.conv_dim(), PD = c_.proj_dim(), H = c_.num_heads, P = c_.head_dim;
    const int64_t G = c_.n_groups, N = c_.state_size, GN = G * N, W1 = c_.conv_state_len();
    const Stream s = step.stream;
    auto scratch = [&](Slot slot, int64_t rows, int64_t cols) { return workspace_f32(step, slot, rows, cols); };

    // in_proj, then x B C and dt out of the fused row; z stays there (the gate reads it strided).
    const TensorView proj = scratch(kProj, T, PD);
    in_.apply(h, proj, {}, s);
    for (const ProjScale& r : proj_scales_) {
      const TensorView cols = column_slice(proj, r.first, r.count);
      scale_softcap_cuda(cols, cols, r.scale, 0.f, s);
    }
    const TensorView xbc = scratch(kXbc, T, CD), dt = scratch(kDt, T, H);
    copy_rows_cuda({column_slice(proj, E, CD), xbc, nullptr, nullptr, T}, s);
    copy_rows_cuda({column_slice(proj, E + CD, H), dt, nullptr, nullptr, T}, s);
    const TensorView z = column_slice(proj, 0, E);

    const DeviceConvStates states(step, layer, CD * W1, H * P * N);

    // The causal conv (SiLU) over the packed batch, each sequence from its tail, the tails advanced in place.
    const TensorView conv = scratch(kConv, T, CD);
    conv_.apply(step, states, xbc, conv);
    const TensorView xs = scratch(kX, T, E), Bm = scratch(kB, T, GN), Cm = scratch(kC, T, GN);
    copy_rows_cuda({column_slice(conv, 0, E), xs, nullptr, nullptr, T}, s);
    copy_rows_cuda({column_slice(conv, E, GN), Bm, nullptr, nullptr, T}, s);
    copy_rows_cuda({column_slice(conv, E + GN, GN), Cm, nullptr, nullptr, T}, s);

    const TensorView y = scratch(kY, T, E);
    scan(step, xs, dt, Bm, Cm, states, y);
    gate_and_norm(step, z, y);
    out_.apply_add(y, x, s);
  }

 private:
  // One scan over the batch in place in the pool's slots: a decode step when every sequence brings one token,
  // else the varlen recurrence or chunked SSD (sequences continuing from a cached state with several tokens
  // included: every sequence starts from its slot).
  void scan(const DeviceStep& step, const TensorView& xs, const TensorView& dt, const TensorView& Bm,
            const TensorView& Cm, const DeviceConvStates& states, const TensorView& y) const {
    const StreamGuard on(step.stream);  // the entries launch on the current stream: a step graph's while capturing
    const TensorView& state = states.state();
    const Batch& batch = *step.batch;
    const int64_t T = step.num_tokens, S = batch.num_sequences(), H = c_.num_heads, P = c_.head_dim,
                  G = c_.n_groups, N = c_.state_size;
    const int64_t longest = longest_sequence(batch);
    const bool limit = c_.dt_min > 0.f || std::isfinite(c_.dt_max);
    const TensorView A = step.view(A_.data(), DType::f32, {H}), D = step.view(D_.data(), DType::f32, {H}),
                     dt_bias = step.view(dt_bias_.data(), DType::f32, {H});
    TensorView pool = step.view(state.data, DType::f32, {state.shape[0], H, P, N});
    pool.strides[0] = state.strides[0];
    if (states.decode()) {
      Mamba2StepArgs a;
      a.state = pool;
      a.state_batch_indices = states.slots();
      a.x = step.view(xs.data, DType::f32, {S, H, P});
      a.dt = step.view(dt.data, DType::f32, {S, H});
      a.A = A, a.D = D, a.dt_bias = dt_bias;
      a.B = step.view(Bm.data, DType::f32, {S, G, N});
      a.C = step.view(Cm.data, DType::f32, {S, G, N});
      a.dt_softplus = true, a.dt_limit = limit, a.dt_min = c_.dt_min, a.dt_max = c_.dt_max;
      a.y = step.view(y.data, DType::f32, {S, H, P});
      mamba2_state_update(a);
      return;
    }
    Mamba2Args a;
    a.x = step.view(xs.data, DType::f32, {1, T, H, P});
    a.dt = step.view(dt.data, DType::f32, {1, T, H});
    a.A = A, a.D = D, a.dt_bias = dt_bias;
    a.B = step.view(Bm.data, DType::f32, {1, T, G, N});
    a.C = step.view(Cm.data, DType::f32, {1, T, G, N});
    a.dt_softplus = true, a.dt_limit = limit, a.dt_min = c_.dt_min, a.dt_max = c_.dt_max;
    a.cu_seqlens = batch.cu_seqlens.data();
    a.cu_seqlens_len = int64_t(batch.cu_seqlens.size());
    a.initial_state = a.final_state = pool;
    a.state_batch_indices = states.slots();
    a.y = step.view(y.data, DType::f32, {1, T, H, P});
    if (longest >= kMinChunkScanTokens && linear_prefill_mode() == LinearPrefillMode::chunked)
      mamba2_chunk_scan(a);
    else
      mamba2_recurrent(a);
  }

  // The CPU's gate_and_norm from the step kernels: y *= silu(z) (the gated activation, z read in place in the
  // projection's rows) before or after an RMSNorm per norm group (each group's columns are rows of their own).
  void gate_and_norm(const DeviceStep& step, const TensorView& z, const TensorView& y) const {
    const Stream s = step.stream;
    if (!c_.gated_norm || !c_.norm_before_gate) gated_activation_cuda(Activation::silu, z, y, y, s);
    if (!c_.gated_norm) return;
    const int64_t E = c_.inner(), gs = E / c_.norm_groups;
    RmsNormCudaOptions opts;
    opts.eps = c_.norm_eps;
    for (int64_t g = 0; g < c_.norm_groups; ++g) {
      TensorView yg = y;
      yg.data = y.ptr<float>() + g * gs;
      yg.shape[1] = gs;
      rms_norm_cuda(yg, step.view(norm_w_.as<float>() + g * gs, DType::f32, {gs}), yg, opts, s);
    }
    if (c_.norm_before_gate) gated_activation_cuda(Activation::silu, z, y, y, s);
  }

  struct ProjScale {
    int64_t first, count;
    float scale;
  };
  Mamba2MixerConfig c_;
  std::vector<ProjScale> proj_scales_;  // the in_proj multipliers other than 1, by runs of columns
  DeviceLinear in_, out_;
  DeviceCausalConv conv_;
  DeviceBuffer A_, D_, dt_bias_, norm_w_;
};

}  // namespace

std::unique_ptr<DeviceMixer> make_device_mamba2(const Mamba2Mixer& mixer, const DeviceLoad& load,
                                                MixerScales scales) {
  return std::make_unique<DeviceMamba2>(mixer, load, scales);
}
#endif

}  // namespace attnzoo
