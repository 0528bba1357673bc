#include "models/cuda/device_attention.h"

#include <optional>

#include "kernels/softmax/attention.h"
#include "kernels/softmax/cuda/kv_write_cuda.h"
#include "kernels/softmax/decode.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/rope_cuda.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots: the block's activations between its launches.
enum Slot : size_t { kQ, kK, kV, kOut };

class DeviceAttention final : public DeviceMixer {
 public:
  DeviceAttention(const AttentionLayer& attn, const DeviceLoad& load)
      : config_(attn.config()),
        act_dtype_(load.act_dtype),
        q_(attn.q_proj(), load),
        k_(attn.k_proj(), load),
        v_(attn.v_proj(), load),
        o_(attn.o_proj(), load) {
    if (attn.q_norm()) q_norm_.emplace(*attn.q_norm(), load.device, load.stream);
    if (attn.k_norm()) k_norm_.emplace(*attn.k_norm(), load.device, load.stream);
    if (attn.rope().config().type != "none") rope_.emplace(attn.rope(), load.device, load.stream);
  }

  void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const override {
    const int64_t T = step.num_tokens, Hq = config_.num_heads, Hkv = config_.num_kv_heads, D = config_.head_dim;
    const size_t e = dtype_size(act_dtype_);
    const Stream s = step.stream;
    DeviceWorkspace& ws = *step.workspace;
    // With the output gate (Qwen3-Next / Qwen3.5) q_proj gives each head's [q ; gate]: q and the gate are read in
    // place as strided views of those rows (the norm, RoPE and attention take any token and head strides).
    const int64_t qw = config_.output_gate ? 2 * D : D;
    void* q = ws.get(kQ, size_t(T * Hq * qw) * e);
    void* k = ws.get(kK, size_t(T * Hkv * D) * e);
    void* v = ws.get(kV, size_t(T * Hkv * D) * e);
    void* out = ws.get(kOut, size_t(T * Hq * D) * e);
    const LayerMemory memory = step.storage->layer(layer);

    q_.apply(h, step.view(q, act_dtype_, {T, Hq * qw}), {}, s);
    k_.apply(h, step.view(k, act_dtype_, {T, Hkv * D}), {}, s);
    v_.apply(h, step.view(v, act_dtype_, {T, Hkv * D}), {}, s);
    TensorView q3 = step.view(q, act_dtype_, {T, Hq, D});
    q3.strides[0] = Hq * qw;
    q3.strides[1] = qw;
    const TensorView k3 = step.view(k, act_dtype_, {T, Hkv, D});
    const TensorView v3 = step.view(v, act_dtype_, {T, Hkv, D});
    if (q_norm_) q_norm_->forward(q3, q3, s);
    if (k_norm_) k_norm_->forward(k3, k3, s);
    if (rope_) rope_->apply(q3, k3, step.positions, s);
    const PagedRowsCuda writes[2] = {{k3, memory.k, memory.k_scale, "k", "k_cache", "k_scale"},
                                     {v3, memory.v, memory.v_scale, "v", "v_cache", "v_scale"}};
    for (const PagedRowsCuda& w : writes) check_paged_rows_cuda(w);
    // Unchecked: the slots come from the pool's own bookkeeping (fill_batch_memory), not from a caller.
    write_paged_rows_cuda(writes, step.slot_mapping(memory.block_group), /*check_slots=*/false, s);
    attend(step, memory, q3, static_cast<uint8_t*>(k), static_cast<uint8_t*>(v), static_cast<uint8_t*>(out));
    if (config_.output_gate) {
      TensorView gate = q3;
      gate.data = static_cast<uint8_t*>(q) + size_t(D) * e;
      const TensorView out3 = step.view(out, act_dtype_, {T, Hq, D});
      sigmoid_gate_cuda(out3, gate, out3, s);
    }
    GemmOptions add_into;
    add_into.accumulate = true;
    o_.apply(step.view(out, act_dtype_, {T, Hq * D}), x, add_into, s);
  }

 private:
  // q3: [T, Hq, D] with its own token and head strides (device_attention's output-gate rows).
  void attend(const DeviceStep& step, const LayerMemory& memory, const TensorView& q3, uint8_t* k, uint8_t* v,
              uint8_t* out) const {
    const int64_t Hq = config_.num_heads, Hkv = config_.num_kv_heads, D = config_.head_dim;
    const size_t e = dtype_size(act_dtype_);
    AttentionOptions opts;
    opts.scale = config_.scale;
    opts.causal = true;
    opts.window = config_.window;
    opts.softcap = config_.softcap;
    const BlockTables& tables = step.batch->tables(memory);
    auto queries = [&](int64_t first_row, std::initializer_list<int64_t> shape) {
      uint8_t* first = static_cast<uint8_t*>(q3.data) + size_t(first_row * q3.strides[0]) * e;
      TensorView t = step.view(first, act_dtype_, shape);
      // [rows, Hq, D] or [seqs, tq, Hq, D]: the row and head strides of q3, the sequence stride tq rows.
      t.strides[t.ndim - 2] = q3.strides[1];
      t.strides[t.ndim - 3] = q3.strides[0];
      if (t.ndim == 4) t.strides[0] = t.shape[1] * q3.strides[0];
      return t;
    };
    for (const AttentionCall& call : *step.calls) {
      const size_t q_at = size_t(call.first_row * Hq * D) * e, kv_at = size_t(call.first_row * Hkv * D) * e;
      if (call.kind == AttentionCall::Kind::prefill) {
        const VarlenInfo varlen{call.cu_seqlens.data(), nullptr, call.num_seqs};
        attention_prefill(queries(call.first_row, {call.rows, Hq, D}),
                          step.view(k + kv_at, act_dtype_, {call.rows, Hkv, D}),
                          step.view(v + kv_at, act_dtype_, {call.rows, Hkv, D}),
                          step.view(out + q_at, act_dtype_, {call.rows, Hq, D}), opts, varlen);
      } else {
        KvCacheView cache;
        cache.k = memory.k;
        cache.v = memory.v;
        cache.k_scale = memory.k_scale;
        cache.v_scale = memory.v_scale;
        cache.cache_seqlens = call.cache_seqlens.data();
        cache.block_table = tables.block_table(call.first_seq);  // the call's sequences' rows are consecutive
        cache.max_blocks_per_seq = tables.max_blocks;
        attention_decode(queries(call.first_row, {call.num_seqs, call.tq, Hq, D}), cache,
                         step.view(out + q_at, act_dtype_, {call.num_seqs, call.tq, Hq, D}), opts);
      }
    }
  }

  AttentionConfig config_;
  DType act_dtype_;
  DeviceLinear q_, k_, v_, o_;
  std::optional<RmsNormCuda> q_norm_, k_norm_;  // Qwen3
  std::optional<RopeCuda> rope_;                // empty: a NoPE layer
};

}  // namespace

std::unique_ptr<DeviceMixer> make_device_attention(const AttentionLayer& attn, const DeviceLoad& load) {
  return std::make_unique<DeviceAttention>(attn, load);
}
#endif

}  // namespace attnzoo
