#include "models/cuda/device_mamba2.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/linear/mamba2/mamba2.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/row_copy_cuda.h"
#include "layers/linear_prefill_mode.h"
#include "layers/sequence_schedule.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots past the attention's and the MLPs' (device_attention.cc, device_mlp.cc).
enum Slot : size_t { kProj = 16, kXbc, kConv, kX, kB, kC, kDt, kY, kConvState, kSsmState };

// As the CPU mixer: prompts this long take the chunked SSD scan, shorter ones the token-by-token recurrence.
constexpr int64_t kMinChunkScanTokens = 16;

DeviceBuffer upload_f32(const std::vector<float>& v, const DeviceLoad& load) {
  DeviceBuffer b(load.device, std::max<size_t>(v.size(), 1) * sizeof(float));
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(float), load.stream);
  return b;
}

// The conv's weight and bias in any checkpoint dtype, widened to f32 like the CPU mixer's conv reads them.
std::vector<float> widened(const TensorView& t) {
  std::vector<float> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = load_as_f32(t.data, t.dtype, i);
  return v;
}

class DeviceMamba2 final : public DeviceMixer {
 public:
  DeviceMamba2(const Mamba2Mixer& m, const DeviceLoad& load)
      : c_(m.config()), in_(m.in_proj(), load), out_(m.out_proj(), load) {
    conv_w_ = upload_f32(widened(m.conv_weight()), load);
    has_conv_bias_ = !m.conv_bias().empty();
    if (has_conv_bias_) conv_b_ = upload_f32(widened(m.conv_bias()), load);
    A_ = upload_f32(m.A(), load);
    D_ = upload_f32(m.D(), load);
    dt_bias_ = upload_f32(m.dt_bias(), load);
    if (c_.gated_norm) norm_w_ = upload_f32(m.norm_weight(), load);
  }

  void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const override {
    const Batch& batch = *step.batch;
    const int64_t T = step.num_tokens, S = batch.num_sequences();
    const int64_t E = c_.inner(), CD = c_.conv_dim(), PD = c_.proj_dim(), H = c_.num_heads, P = c_.head_dim;
    const int64_t G = c_.n_groups, N = c_.state_size, GN = G * N, W1 = c_.conv_state_len();
    const Stream s = step.stream;
    DeviceWorkspace& ws = *step.workspace;
    auto scratch = [&](Slot slot, int64_t rows, int64_t cols) {
      return step.view(ws.get(slot, size_t(std::max<int64_t>(rows * cols, 1)) * 4), DType::f32, {rows, cols});
    };
    auto columns = [&](const TensorView& t, int64_t from, int64_t cols) {  // a column slice of a [rows, n] block
      TensorView v = t;
      v.data = t.ptr<float>() + from;
      v.shape[1] = cols;
      return v;
    };

    // in_proj, then x B C and dt out of the fused row; z stays there (the gate reads it strided).
    const TensorView proj = scratch(kProj, T, PD);
    in_.apply(h, proj, {}, s);
    const TensorView xbc = scratch(kXbc, T, CD), dt = scratch(kDt, T, H);
    copy_rows_cuda({columns(proj, E, CD), xbc, nullptr, nullptr, T}, s);
    copy_rows_cuda({columns(proj, E + CD, H), dt, nullptr, nullptr, T}, s);
    const TensorView z = columns(proj, 0, E);

    // The sequences' slots: [conv tail (CD x W1, padded) | SSM state (H P N)] at memory.state(slot).
    const LayerMemory memory = step.storage->layer(layer);
    const int64_t conv_elems = CD * W1, tail = conv_tail_floats(conv_elems), state_elems = H * P * N;
    const int64_t slots = S == 0 ? 0 : int64_t(*std::max_element(batch.state_slots.begin(), batch.state_slots.end())) + 1;
    TensorView slab_conv = step.view(memory.states, DType::f32, {slots, conv_elems});
    TensorView slab_state = step.view(memory.states + tail, DType::f32, {slots, state_elems});
    slab_conv.strides[0] = slab_state.strides[0] = memory.state_stride;
    const TensorView conv_state = scratch(kConvState, S, conv_elems), ssm_state = scratch(kSsmState, S, state_elems);
    copy_rows_cuda({slab_conv, conv_state, step.state_slots(), nullptr, S}, s);
    copy_rows_cuda({slab_state, ssm_state, step.state_slots(), nullptr, S}, s);

    // The causal conv (SiLU) over the packed batch, each sequence from its tail, the tails advanced in place.
    const TensorView conv = scratch(kConv, T, CD);
    CausalConv1dOptions co;
    if (has_conv_bias_) co.bias = step.view(conv_b_.data(), DType::f32, {CD});
    co.initial_state = co.final_state = step.view(conv_state.data, DType::f32, {S, CD, W1});
    co.activation = ConvActivation::silu;
    co.cu_seqlens = batch.cu_seqlens.data();
    co.cu_seqlens_len = int64_t(batch.cu_seqlens.size());
    causal_conv1d(step.view(xbc.data, DType::f32, {1, T, CD}), step.view(conv_w_.data(), DType::f32, {CD, c_.conv_kernel}),
                  step.view(conv.data, DType::f32, {1, T, CD}), co);
    const TensorView xs = scratch(kX, T, E), Bm = scratch(kB, T, GN), Cm = scratch(kC, T, GN);
    copy_rows_cuda({columns(conv, 0, E), xs, nullptr, nullptr, T}, s);
    copy_rows_cuda({columns(conv, E, GN), Bm, nullptr, nullptr, T}, s);
    copy_rows_cuda({columns(conv, E + GN, GN), Cm, nullptr, nullptr, T}, s);

    const TensorView y = scratch(kY, T, E);
    scan(step, xs, dt, Bm, Cm, ssm_state, y);
    gate_and_norm(step, z, y);
    GemmOptions add_into;
    add_into.accumulate = true;
    out_.apply(y, x, add_into, s);

    copy_rows_cuda({conv_state, slab_conv, nullptr, step.state_slots(), S}, s);
    copy_rows_cuda({ssm_state, slab_state, nullptr, step.state_slots(), S}, s);
  }

 private:
  // One scan over the batch on the dense states: a decode step when every sequence brings one token, else the
  // varlen recurrence or chunked SSD (sequences continuing from a cached state with several tokens included:
  // every sequence starts from its state).
  void scan(const DeviceStep& step, const TensorView& xs, const TensorView& dt, const TensorView& Bm,
            const TensorView& Cm, const TensorView& state, const TensorView& y) const {
    const Batch& batch = *step.batch;
    const int64_t T = step.num_tokens, S = batch.num_sequences(), H = c_.num_heads, P = c_.head_dim,
                  G = c_.n_groups, N = c_.state_size;
    int64_t longest = 0;
    for (int64_t i = 0; i < S; ++i) longest = std::max<int64_t>(longest, batch.seq_len(i));
    const bool limit = c_.dt_min > 0.f || std::isfinite(c_.dt_max);
    const TensorView A = step.view(A_.data(), DType::f32, {H}), D = step.view(D_.data(), DType::f32, {H}),
                     dt_bias = step.view(dt_bias_.data(), DType::f32, {H});
    if (longest == 1 && T == S) {
      Mamba2StepArgs a;
      a.state = step.view(state.data, DType::f32, {S, H, P, N});
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
    a.initial_state = a.final_state = step.view(state.data, DType::f32, {S, H, P, N});
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

  Mamba2MixerConfig c_;
  DeviceLinear in_, out_;
  DeviceBuffer conv_w_, conv_b_, A_, D_, dt_bias_, norm_w_;
  bool has_conv_bias_ = false;
};

}  // namespace

std::unique_ptr<DeviceMixer> make_device_mamba2(const Mamba2Mixer& mixer, const DeviceLoad& load) {
  return std::make_unique<DeviceMamba2>(mixer, load);
}
#endif

}  // namespace attnzoo
