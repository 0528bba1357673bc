#include "models/cuda/device_short_conv.h"

#include "layers/cuda/elementwise_cuda.h"
#include "models/cuda/device_conv_state.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots past the attention's and the MLPs' (device_attention.cc, device_mlp.cc).
enum Slot : size_t { kProj = 16, kBx, kConv };
static_assert(kConv < kDecodePlanSlots, "the step's decode plans own the slots from kDecodePlanSlots on");

class DeviceShortConv final : public DeviceMixer {
 public:
  DeviceShortConv(const ShortConvMixer& m, const DeviceLoad& load)
      : hidden_(m.hidden()),
        tail_(m.state_len()),
        in_(m.in_proj(), load),
        out_(m.out_proj(), load),
        conv_(m.conv_weight(), m.conv_bias(), m.kernel(), ConvActivation::none, load) {}

  // A decode step runs in place in the pool's slots with nothing uploaded of its own (device_conv_state.h).
  bool replayable() const override { return true; }

  void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const override {
    const int64_t T = step.num_tokens, Hd = hidden_;
    const Stream s = step.stream;
    const TensorView proj = workspace_f32(step, kProj, T, 3 * Hd);
    in_.apply(h, proj, {}, s);
    const TensorView bx = workspace_f32(step, kBx, T, Hd), conv = workspace_f32(step, kConv, T, Hd);
    mul_cuda(column_slice(proj, 0, Hd), column_slice(proj, 2 * Hd, Hd), bx, s);

    const DeviceConvStates states(step, layer, Hd * tail_, 0);
    conv_.apply(step, states, bx, conv);

    mul_cuda(conv, column_slice(proj, Hd, Hd), conv, s);
    out_.apply_add(conv, x, s);
  }

 private:
  int64_t hidden_, tail_;
  DeviceLinear in_, out_;
  DeviceCausalConv conv_;
};

}  // namespace

std::unique_ptr<DeviceMixer> make_device_short_conv(const ShortConvMixer& mixer, const DeviceLoad& load) {
  return std::make_unique<DeviceShortConv>(mixer, load);
}
#endif

}  // namespace attnzoo
