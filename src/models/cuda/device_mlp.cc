#include "models/cuda/device_mlp.h"

#include <vector>

#include "layers/cuda/elementwise_cuda.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots after the attention's (device_attention.cc), so the two never share one within a block.
enum Slot : size_t { kGate = 8, kUp };

class DeviceGatedMlp final : public DeviceFfn {
 public:
  DeviceGatedMlp(const GatedMlp& mlp, const DeviceLoad& load)
      : gate_(mlp.gate_proj(), load),
        up_(mlp.up_proj(), load),
        down_(mlp.down_proj(), load),
        act_(mlp.activation()),
        intermediate_(mlp.intermediate()) {}

  void forward(const DeviceStep& step, const TensorView& h, const TensorView& x) const override {
    const int64_t T = step.num_tokens, I = intermediate_;
    const Stream s = step.stream;
    const TensorView gate = step.view(step.workspace->get(kGate, size_t(T * I) * 4), DType::f32, {T, I});
    const TensorView up = step.view(step.workspace->get(kUp, size_t(T * I) * 4), DType::f32, {T, I});
    gate_.apply(h, gate, {}, s);
    up_.apply(h, up, {}, s);
    gated_activation_cuda(act_, gate, up, gate, s);
    GemmOptions add_into;
    add_into.accumulate = true;
    down_.apply(gate, x, add_into, s);
  }

 private:
  DeviceLinear gate_, up_, down_;
  Activation act_;
  int64_t intermediate_;
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
    GemmOptions add_into;
    add_into.accumulate = true;
    down_.apply(up, x, add_into, s);
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
  return std::make_unique<DeviceGatedMlp>(mlp, load);
}
#endif

}  // namespace attnzoo
