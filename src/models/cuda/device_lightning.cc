#include "models/cuda/device_lightning.h"

#include <algorithm>
#include <vector>

#include "kernels/linear/simple_gla/simple_gla.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/moe_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/row_copy_cuda.h"
#include "layers/linear_prefill_mode.h"
#include "models/cuda/device_conv_state.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots past the attention's and the MLPs' (device_attention.cc, device_mlp.cc); a block has one mixer,
// so these may be the other mixers' too.
enum Slot : size_t { kQkv = 16, kQ, kK, kV, kO, kGate };
static_assert(kGate < kDecodePlanSlots, "the step's decode plans own the slots from kDecodePlanSlots on");

class DeviceLightning final : public DeviceMixer {
 public:
  DeviceLightning(const LightningAttentionMixer& m, const DeviceLoad& load)
      : c_(m.config()),
        qkv_(m.weights().qkv_proj, load),
        gate_(m.weights().output_gate, load),
        out_(m.weights().out_proj, load),
        norm_w_(upload_f32(m.norm_weight(), load)),
        log_decay_(upload_f32(m.log_decay(), load)) {}

  bool replayable() const override { return true; }

  void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const override {
    const int64_t T = step.num_tokens, H = c_.heads, D = c_.head_dim, inner = c_.inner();
    const Stream s = step.stream;
    auto scratch = [&](Slot slot, int64_t rows, int64_t cols) { return workspace_f32(step, slot, rows, cols); };

    // silu(qkv_proj(h)); each head's row holds [q | k | v]: as [T * H, 3 D] rows, each a column slice apart.
    const TensorView qkv = scratch(kQkv, T, 3 * inner);
    qkv_.apply(h, qkv, {}, s);
    activation_inplace_cuda(Activation::silu, qkv, s);
    const TensorView rows = step.view(qkv.data, DType::f32, {T * H, 3 * D});
    const TensorView q = scratch(kQ, T * H, D), k = scratch(kK, T * H, D), v = scratch(kV, T * H, D);
    copy_rows_cuda({column_slice(rows, 0, D), q, nullptr, nullptr, T * H}, s);
    copy_rows_cuda({column_slice(rows, D, D), k, nullptr, nullptr, T * H}, s);
    copy_rows_cuda({column_slice(rows, 2 * D, D), v, nullptr, nullptr, T * H}, s);

    const TensorView o = scratch(kO, T, inner);
    scan(step, layer, q, k, v, o);

    // The norm over all heads' features, then the sigmoid gate of the block's input, then out_proj.
    RmsNormCudaOptions no;
    no.eps = c_.norm_eps;
    rms_norm_cuda(o, step.view(norm_w_.data(), DType::f32, {inner}), o, no, s);
    const TensorView gate = scratch(kGate, T, inner);
    gate_.apply(h, gate, {}, s);
    sigmoid_gate_cuda(o, gate, o, s);
    out_.apply_add(o, x, s);
  }

 private:
  // Simple GLA with the per-head constant decay (g_gamma = -slope, scale 1) over the batch's q, k, v, each
  // [T * H, D], in place in the pool's slots (the step's uploaded slot indices, pads -1 skipped): a decode step,
  // else the packed recurrence or chunked form (a fresh sequence's slot zeroed by the pool, a prefix hit's
  // restored).
  void scan(const DeviceStep& step, int64_t layer, const TensorView& q, const TensorView& k, const TensorView& v,
            const TensorView& o) const {
    const StreamGuard on(step.stream);  // the entries launch on the current stream: a step graph's while capturing
    const Batch& batch = *step.batch;
    const int64_t T = step.num_tokens, H = c_.heads, D = c_.head_dim, S = batch.num_sequences();
    const LayerMemory memory = step.storage->layer(layer);
    const std::vector<int32_t>& slots = batch.state_slots;
    // The slab as rows of state_stride floats, as many as the highest slot the batch names.
    const int64_t slab_rows =
        slots.empty() ? 0 : std::max<int64_t>(int64_t(*std::max_element(slots.begin(), slots.end())) + 1, 0);
    GlaOptions opts;
    opts.scale = 1.f;  // MiniMax does not scale the queries
    opts.check_values = false;  // the layer's own decays (finite, <= 0 by construction): no device scan
    const TensorView g_gamma = step.view(log_decay_.data(), DType::f32, {H});
    TensorView pool = step.view(memory.states, DType::f32, {slab_rows, H, D, D});
    pool.strides[0] = memory.state_stride;
    opts.initial_state = opts.final_state = pool;
    opts.ssm_state_indices = step.state_slots();
    if (decodes_in_place(batch)) {
      // A padded batch of S one-token sequences (no offsets to upload), each state read and written once in its
      // pool row; g_gamma is already on the device, so the launch uploads nothing.
      auto per_sequence = [&](const TensorView& t) { return step.view(t.data, DType::f32, {S, 1, H, D}); };
      recurrent_simple_gla(per_sequence(q), per_sequence(k), per_sequence(v), TensorView{}, g_gamma,
                           per_sequence(o), opts);
      return;
    }
    opts.cu_seqlens = batch.cu_seqlens.data();
    opts.cu_seqlens_len = int64_t(batch.cu_seqlens.size());
    auto view = [&](const TensorView& t) { return step.view(t.data, DType::f32, {1, T, H, D}); };
    // As the CPU mixer: single tokens and the forced recurrent mode take the recurrence.
    if (longest_sequence(batch) == 1 || linear_prefill_mode() == LinearPrefillMode::recurrent)
      recurrent_simple_gla(view(q), view(k), view(v), TensorView{}, g_gamma, view(o), opts);
    else
      chunk_simple_gla(view(q), view(k), view(v), TensorView{}, g_gamma, view(o), opts);
  }

  LightningAttentionConfig c_;
  DeviceLinear qkv_, gate_, out_;
  DeviceBuffer norm_w_, log_decay_;
};

}  // namespace

std::unique_ptr<DeviceMixer> make_device_lightning(const LightningAttentionMixer& mixer, const DeviceLoad& load) {
  return std::make_unique<DeviceLightning>(mixer, load);
}
#endif

}  // namespace attnzoo
