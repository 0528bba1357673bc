#include "models/cuda/device_mlp.h"

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

}  // namespace

std::unique_ptr<DeviceFfn> make_device_gated_mlp(const GatedMlp& mlp, const DeviceLoad& load) {
  return std::make_unique<DeviceGatedMlp>(mlp, load);
}
#endif

}  // namespace attnzoo
