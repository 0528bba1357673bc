#include "models/cuda/device_gated_deltanet.h"

#include <vector>

#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/delta_gates_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/row_copy_cuda.h"
#include "models/cuda/device_conv_state.h"
#include "models/cuda/device_delta_scan.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots past the attention's and the MLPs' (device_attention.cc, device_mlp.cc); a block has one mixer,
// so these may be Mamba-2's too.
// kScan and the three after it are run_conv_delta_scan's.
enum Slot : size_t { kRaw = 16, kMixed, kConv, kZ, kBa, kG, kBeta, kScan };
static_assert(kScan + 3 < kDecodePlanSlots, "the step's decode plans own the slots from kDecodePlanSlots on");

class DeviceGatedDeltaNet final : public DeviceMixer {
 public:
  DeviceGatedDeltaNet(const GatedDeltaNetMixer& m, const DeviceLoad& load)
      : c_(m.config()),
        width_(m.in_proj_width()),
        targets_(m.run_targets()),
        out_(m.out_proj(), load),
        conv_(m.conv_weight(), m.conv_bias(), c_.conv_kernel, ConvActivation::silu, load) {
    in_.reserve(m.in_proj().size());
    for (const Linear& l : m.in_proj()) in_.emplace_back(l, load);
    neg_A_ = upload_f32(m.neg_A(), load);
    dt_bias_ = upload_f32(m.dt_bias(), load);
    norm_w_ = upload_f32(m.norm_weight(), load);
  }

  // A decode step runs in place in the pool's slots with nothing uploaded of its own (device_conv_state.h).
  bool replayable() const override { return true; }

  void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const override {
    const int64_t T = step.num_tokens, C = c_.conv_dim(), HV = c_.num_v_heads;
    const int64_t H = c_.num_k_heads, K = c_.head_k_dim, V = c_.head_v_dim, vd = c_.value_dim();
    const int64_t W1 = c_.conv_state_len();
    const Stream s = step.stream;
    auto scratch = [&](Slot slot, int64_t rows, int64_t cols) { return workspace_f32(step, slot, rows, cols); };

    // The sources' outputs side by side (each GEMM writes its columns of the wide rows, bias included), then each
    // run copied into its part, as the CPU mixer regroups them.
    const TensorView raw = scratch(kRaw, T, width_);
    int64_t col = 0;
    for (const DeviceLinear& l : in_) {
      l.apply(h, column_slice(raw, col, l.out_features()), {}, s);
      col += l.out_features();
    }
    const TensorView ba = scratch(kBa, T, 2 * HV);
    const TensorView parts[4] = {scratch(kMixed, T, C), scratch(kZ, T, vd), column_slice(ba, 0, HV),
                                 column_slice(ba, HV, HV)};
    for (const GatedDeltaNetMixer::RunTarget& r : targets_)
      copy_rows_cuda({column_slice(raw, r.begin, r.count), column_slice(parts[r.part], r.offset, r.count), nullptr,
                      nullptr, T},
                     s);
    const TensorView g = scratch(kG, T, HV), beta = scratch(kBeta, T, HV);
    delta_gates_cuda({parts[2], parts[3], step.view(neg_A_.data(), DType::f32, {HV}),
                      step.view(dt_bias_.data(), DType::f32, {HV}), g, beta},
                     s);

    const DeviceConvStates states(step, layer, C * W1, HV * K * V);

    // The causal conv (SiLU) over q k v of the packed batch, each sequence from its tail, advanced in place.
    const TensorView conv = scratch(kConv, T, C);
    conv_.apply(step, states, parts[0], conv);
    const TensorView o = run_conv_delta_scan(step, states, conv, g, beta, {H, K, HV, V}, kScan,
                                             recurrent_gated_delta_rule, chunk_gated_delta_rule);

    // Norm first, then the gate (Qwen3NextRMSNormGated), per value head: rows of V.
    const TensorView heads = step.view(o.data, DType::f32, {T * HV, V});
    RmsNormCudaOptions opts;
    opts.eps = c_.norm_eps;
    rms_norm_cuda(heads, step.view(norm_w_.data(), DType::f32, {V}), heads, opts, s);
    gated_activation_cuda(Activation::silu, step.view(parts[1].data, DType::f32, {T * HV, V}), heads, heads, s);
    out_.apply_add(o, x, s);
  }

 private:
  GatedDeltaNetConfig c_;
  int64_t width_;
  std::vector<GatedDeltaNetMixer::RunTarget> targets_;
  std::vector<DeviceLinear> in_;
  DeviceLinear out_;
  DeviceCausalConv conv_;
  DeviceBuffer neg_A_, dt_bias_, norm_w_;
};

}  // namespace

std::unique_ptr<DeviceMixer> make_device_gated_deltanet(const GatedDeltaNetMixer& mixer, const DeviceLoad& load) {
  return std::make_unique<DeviceGatedDeltaNet>(mixer, load);
}
#endif

}  // namespace attnzoo
