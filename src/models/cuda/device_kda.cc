#include "models/cuda/device_kda.h"

#include "kernels/linear/kda/kda.h"
#include "layers/cuda/delta_gates_cuda.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "models/cuda/device_conv_state.h"
#include "models/cuda/device_delta_scan.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots past the attention's and the MLPs' (device_attention.cc, device_mlp.cc); a block has one mixer,
// so these may be the other mixers' too.
// kScan and the three after it are run_conv_delta_scan's.
enum Slot : size_t { kMixed = 16, kLow, kGRaw, kBRaw, kG, kBeta, kGate, kConv, kScan };
static_assert(kScan + 3 < kDecodePlanSlots, "the step's decode plans own the slots from kDecodePlanSlots on");

class DeviceKda final : public DeviceMixer {
 public:
  DeviceKda(const KdaMixer& m, const DeviceLoad& load)
      : c_(m.config()),
        q_(m.weights().q_proj, load),
        k_(m.weights().k_proj, load),
        v_(m.weights().v_proj, load),
        f_a_(m.weights().f_a_proj, load),
        f_b_(m.weights().f_b_proj, load),
        b_(m.weights().b_proj, load),
        g_a_(m.weights().g_a_proj, load),
        g_b_(m.weights().g_b_proj, load),
        o_(m.weights().o_proj, load),
        conv_(m.conv_weight(), {}, c_.conv_kernel, ConvActivation::silu, load),
        neg_A_(upload_f32(m.neg_A(), load)),
        dt_bias_(upload_f32(m.dt_bias(), load)),
        norm_w_(upload_f32(m.norm_weight(), load)) {}

  // A decode step runs in place in the pool's slots with nothing uploaded of its own (device_conv_state.h).
  bool replayable() const override { return true; }

  void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const override {
    const int64_t T = step.num_tokens, C = c_.conv_dim(), D = c_.qkv_dim();
    const int64_t H = c_.num_heads, K = c_.head_dim, W1 = c_.conv_state_len();
    const Stream s = step.stream;
    auto scratch = [&](Slot slot, int64_t rows, int64_t cols) { return workspace_f32(step, slot, rows, cols); };

    // [q | k | v] side by side (each GEMM writes its columns of the rows), then the gates.
    const TensorView mixed = scratch(kMixed, T, C);
    q_.apply(h, column_slice(mixed, 0, D), {}, s);
    k_.apply(h, column_slice(mixed, D, D), {}, s);
    v_.apply(h, column_slice(mixed, 2 * D, D), {}, s);
    const TensorView low = scratch(kLow, T, K), g_raw = scratch(kGRaw, T, D), b_raw = scratch(kBRaw, T, H);
    f_a_.apply(h, low, {}, s);
    f_b_.apply(low, g_raw, {}, s);
    b_.apply(h, b_raw, {}, s);
    const TensorView g = scratch(kG, T, D), beta = scratch(kBeta, T, H);
    delta_gates_cuda({b_raw, g_raw, step.view(neg_A_.data(), DType::f32, {H}),
                      step.view(dt_bias_.data(), DType::f32, {D}), g, beta},
                     s);
    const TensorView gate = scratch(kGate, T, D);
    g_a_.apply(h, low, {}, s);  // the forget gate's f_b has read `low` by now: one stream
    g_b_.apply(low, gate, {}, s);

    const DeviceConvStates states(step, layer, C * W1, H * K * K);
    const TensorView conv = scratch(kConv, T, C);
    conv_.apply(step, states, mixed, conv);
    const TensorView o = run_conv_delta_scan(step, states, conv, g, beta, {H, K, H, K, /*channel_gate=*/true}, kScan,
                                             recurrent_kda, chunk_kda);

    // KimiLinearRMSNormGated: the norm per head (rows of K), times w, then times sigmoid(gate).
    const TensorView heads = step.view(o.data, DType::f32, {T * H, K});
    RmsNormCudaOptions opts;
    opts.eps = c_.norm_eps;
    rms_norm_cuda(heads, step.view(norm_w_.data(), DType::f32, {K}), heads, opts, s);
    sigmoid_gate_cuda(heads, step.view(gate.data, DType::f32, {T * H, K}), heads, s);
    o_.apply_add(o, x, s);
  }

 private:
  KdaConfig c_;
  DeviceLinear q_, k_, v_, f_a_, f_b_, b_, g_a_, g_b_, o_;
  DeviceCausalConv conv_;
  DeviceBuffer neg_A_, dt_bias_, norm_w_;
};

}  // namespace

std::unique_ptr<DeviceMixer> make_device_kda(const KdaMixer& mixer, const DeviceLoad& load) {
  return std::make_unique<DeviceKda>(mixer, load);
}
#endif

}  // namespace attnzoo
