#include "models/cuda/device_mlp.h"

#include <optional>
#include <span>
#include <vector>

#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/gpt_oss_moe_cuda.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots after the attention's (device_attention.cc), so the two never share one within a block.
enum Slot : size_t { kGateUp = 8, kGate, kUp };

// The intermediate rows between the projections: 16-bit, so the down projection reads half the bytes and
// cuBLASLt takes it with the 16-bit weights.
constexpr DType kMid = DType::bf16;

// A multiplier on `l`'s output, folded into its rows and bias where its weights can take it (device_weight_fold.h).
WeightFold output_fold(const Linear& l, float scale) {
  return WeightFold::output(foldable(l.matrix().type) ? scale : 1.f);
}

class DeviceGatedMlp final : public DeviceFfn {
 public:
  DeviceGatedMlp(const GatedMlp& mlp, const DeviceLoad& load, float gate_mult, float down_mult)
      : down_(mlp.down_proj(), load, output_fold(mlp.down_proj(), down_mult)),
        act_(mlp.activation()),
        intermediate_(mlp.intermediate()),
        gate_mult_(foldable(mlp.gate_proj().matrix().type) ? 1.f : gate_mult),
        down_mult_(foldable(mlp.down_proj().matrix().type) ? 1.f : down_mult) {
    // Falcon-H1's muP: gate(x) * gate_mult and down(.) * down_mult are the gate's and the down projection's rows
    // (and biases) scaled at load; what a GGUF block weight could not take stays a multiplier here.
    const WeightFold gate_fold = output_fold(mlp.gate_proj(), gate_mult);
    // One [gate|up] weight where the two go up alike: one GEMM, the activation over its halves (silu_and_mul).
    const Linear* parts[2] = {&mlp.gate_proj(), &mlp.up_proj()};
    if (DeviceLinear::stackable(parts)) {
      const WeightFold folds[2] = {gate_fold, {}};
      gate_up_.emplace(parts, load, DType::f32, folds);
    } else {
      gate_.emplace(mlp.gate_proj(), load, gate_fold);
      up_.emplace(mlp.up_proj(), load);
    }
    // An unfolded down multiplier scales the down projection's input, which leaves its bias (Falcon-H1's mlp_bias)
    // unscaled: the missing (down_mult - 1) * bias goes on after it, every row alike.
    const std::span<const float> bias = mlp.down_proj().bias();
    if (down_mult_ != 1.f && !bias.empty()) {
      std::vector<float> rest(bias.size());
      for (size_t i = 0; i < bias.size(); ++i) rest[i] = (down_mult_ - 1.f) * bias[i];
      bias_rest_bytes_ = DeviceBuffer(load.device, rest.size() * sizeof(float));
      bias_rest_bytes_.upload(rest.data(), bias_rest_bytes_.bytes(), load.stream);
      bias_rest_ = device_view(load.device, bias_rest_bytes_.data(), DType::f32, {1, int64_t(rest.size())});
    }
  }

  bool replayable() const override { return true; }  // GEMMs and one element-wise kernel over fixed buffers

  void forward(const DeviceStep& step, const TensorView& h, const TensorView& x) const override {
    const int64_t T = step.num_tokens, I = intermediate_;
    const size_t e = dtype_size(kMid);
    const Stream s = step.stream;
    TensorView gate, up;
    if (gate_up_) {
      void* both = step.workspace->get(kGateUp, size_t(T * 2 * I) * e);
      gate_up_->apply(h, step.view(both, kMid, {T, 2 * I}), {}, s);
      gate = step.view(both, kMid, {T, I});
      gate.strides[0] = 2 * I;
      up = gate;
      up.data = static_cast<uint8_t*>(both) + size_t(I) * e;
    } else {
      gate = step.view(step.workspace->get(kGate, size_t(T * I) * e), kMid, {T, I});
      up = step.view(step.workspace->get(kUp, size_t(T * I) * e), kMid, {T, I});
      gate_->apply(h, gate, {}, s);
      up_->apply(h, up, {}, s);
    }
    // Falcon-H1's muP where the weights could not fold it: the gate scaled before the activation; the down
    // multiplier scales the (linear) down projection's input instead of its output, which adds straight into the
    // residual stream.
    if (gate_mult_ != 1.f) scale_softcap_cuda(gate, gate, gate_mult_, 0.f, s);
    gated_activation_cuda(act_, gate, up, gate, s);  // in place over the gate half
    if (down_mult_ != 1.f) scale_softcap_cuda(gate, gate, down_mult_, 0.f, s);
    down_.apply_add(gate, x, s);
    if (bias_rest_.data) grouped_bias_cuda(x, bias_rest_, nullptr, s);
  }

 private:
  std::optional<DeviceLinear> gate_up_, gate_, up_;  // gate_up_, or the two where they cannot be stacked
  DeviceLinear down_;
  Activation act_;
  int64_t intermediate_;
  float gate_mult_, down_mult_;  // ScaledGatedMlp's where its weights could not fold them, else 1
  DeviceBuffer bias_rest_bytes_;
  TensorView bias_rest_;  // f32 [1, hidden]: (down_mult - 1) * the down bias, or none
};

class DevicePlainMlp final : public DeviceFfn {
 public:
  DevicePlainMlp(const PlainMlp& mlp, const DeviceLoad& load)
      : up_(mlp.up_proj(), load),
        down_(mlp.down_proj(), load),
        act_(mlp.activation()),
        intermediate_(mlp.intermediate()) {
    const std::vector<float> ones(size_t(intermediate_), 1.f);
    ones_ = DeviceBuffer(load.device, ones.size() * sizeof(float));
    ones_.upload(ones.data(), ones_.bytes(), load.stream);
  }

  void forward(const DeviceStep& step, const TensorView& h, const TensorView& x) const override {
    const int64_t T = step.num_tokens, I = intermediate_;
    const Stream s = step.stream;
    const TensorView up = step.view(step.workspace->get(kUp, size_t(T * I) * 4), DType::f32, {T, I});
    up_.apply(h, up, {}, s);
    // act(up) as the gated kernel's act(up) * 1, the ones one row read for every token (row stride 0): exact.
    TensorView ones = step.view(ones_.data(), DType::f32, {T, I});
    ones.strides[0] = 0;
    gated_activation_cuda(act_, up, ones, up, s);
    down_.apply_add(up, x, s);
  }

 private:
  DeviceLinear up_, down_;
  Activation act_;
  int64_t intermediate_;
  DeviceBuffer ones_;  // f32 [intermediate]
};

}  // namespace

std::unique_ptr<DeviceFfn> make_device_plain_mlp(const PlainMlp& mlp, const DeviceLoad& load) {
  return std::make_unique<DevicePlainMlp>(mlp, load);
}

std::unique_ptr<DeviceFfn> make_device_gated_mlp(const GatedMlp& mlp, const DeviceLoad& load) {
  return std::make_unique<DeviceGatedMlp>(mlp, load, 1.f, 1.f);
}

std::unique_ptr<DeviceFfn> make_device_scaled_gated_mlp(const ScaledGatedMlp& mlp, const DeviceLoad& load) {
  return std::make_unique<DeviceGatedMlp>(mlp.mlp(), load, mlp.gate_multiplier(), mlp.down_multiplier());
}
#endif

}  // namespace attnzoo
