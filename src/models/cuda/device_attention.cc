#include "models/cuda/device_attention.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/error.h"
#include "kernels/softmax/cuda/decode_cuda.h"
#include "kernels/softmax/cuda/kv_write_cuda.h"
#include "kernels/softmax/cuda/prefill_cuda.h"
#include "kernels/softmax/decode.h"
#include "kernels/softmax/decode_problem.h"
#include "kernels/softmax/problem.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/rope_cuda.h"
#include "models/cuda/step_decode_plans.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots: the block's activations between its launches.
enum Slot : size_t { kQkv, kQ, kK, kV, kOut };

// Decode block tables go to the device this many blocks wide at a time (prepare_decode).
constexpr int64_t kTableWidthStep = 64;

// Rows [T, heads, D] of a 16-bit activation buffer whose token rows are `row` elements apart and heads `head`
// elements apart (a slice of one fused [q|k|v] row, q's heads among their output gates, or a buffer of its own),
// starting `col` elements into the row.
TensorView head_rows(const DeviceStep& step, void* base, DType dtype, int64_t col, int64_t row, int64_t head,
                     int64_t T, int64_t heads, int64_t D) {
  TensorView t = step.view(static_cast<uint8_t*>(base) + size_t(col) * dtype_size(dtype), dtype, {T, heads, D});
  t.strides[0] = row;
  t.strides[1] = head;
  return t;
}

// A [T, heads, D] view's rows as [T, heads * D]: the q / k norms across heads and the query temperature read whole
// rows. Only where a row's heads are contiguous: not q among its output gates (check_decoder_runs_on_cuda refuses
// the gate beside either).
TensorView whole_rows(const TensorView& t) {
  if (t.strides[1] != t.shape[2] || t.strides[2] != 1)
    throw ArgumentError("device: q / k rows whose heads are not contiguous (" + t.shape_str() +
                        ") cannot be normed or scaled as whole rows");
  TensorView r = t;
  r.ndim = 2;
  r.shape = {t.shape[0], t.shape[1] * t.shape[2]};
  r.strides = {t.strides[0], 1};
  return r;
}

// Packed rows [first, first + n) of a [T, H, D] view.
TensorView token_rows(const TensorView& t, int64_t first, int64_t n) {
  TensorView r = t;
  r.data = static_cast<uint8_t*>(t.data) + size_t(first * t.strides[0]) * dtype_size(t.dtype);
  r.shape[0] = n;
  return r;
}

// The same rows as [seqs, tq, H, D] (tq consecutive rows per sequence), as the decode takes queries.
TensorView seq_rows(const TensorView& t, int64_t first, int64_t seqs, int64_t tq) {
  TensorView r = token_rows(t, first, seqs * tq);
  r.ndim = 4;
  r.shape = {seqs, tq, t.shape[1], t.shape[2]};
  r.strides = {tq * t.strides[0], t.strides[0], t.strides[1], t.strides[2]};
  return r;
}

class DeviceAttention final : public DeviceMixer {
 public:
  DeviceAttention(const AttentionLayer& attn, const DeviceLoad& load, MixerScales scales)
      : config_(attn.config()),
        act_dtype_(load.act_dtype),
        o_(attn.o_proj(), load, WeightFold::output(scales.out)),
        sinks_(attn.sinks()) {
    // One [q|k|v] weight where the three go up alike (dense, one dtype): one GEMM reads h once. With the output
    // gate q_proj's rows are each head's [q ; gate] and stay so inside the stack, so the gate is read from the q
    // part either way (activations).
    const Linear* parts[3] = {&attn.q_proj(), &attn.k_proj(), &attn.v_proj()};
    const WeightFold in = WeightFold::input(scales.in);
    if (DeviceLinear::stackable(parts)) {
      const WeightFold folds[3] = {in, in, in};
      qkv_.emplace(parts, load, act_dtype_, folds);  // the bias in y's dtype, which cuBLASLt adds
    } else {
      q_.emplace(attn.q_proj(), load, in);
      k_.emplace(attn.k_proj(), load, in);
      v_.emplace(attn.v_proj(), load, in);
    }
    if (attn.q_norm()) q_norm_.emplace(*attn.q_norm(), load.device, load.stream);
    if (attn.k_norm()) k_norm_.emplace(*attn.k_norm(), load.device, load.stream);
    if (attn.rope().config().type != "none") rope_.emplace(attn.rope(), load.device, load.stream);
  }

  // Its decode and prefill plans are made in prepare and travel in the step's copy; the signature holds the decode
  // plans' grids.
  bool replayable() const override { return true; }

  void prepare(const DeviceStep& step, int64_t layer) const override {
    const Activations a = activations(step);
    const LayerMemory memory = step.storage->layer(layer);
    const BlockTables& tables = step.batch->tables(memory);
    for (size_t i = 0; i < step.calls->size(); ++i) {
      const AttentionCall& call = (*step.calls)[i];
      if (call.kind == AttentionCall::Kind::prefill) {
        step.decode_plans->prepare_prefill(int64_t(i), prefill_problem(call, a.q, a.k, a.v, a.out),
                                           prepare_attention_prefill_cuda);
        continue;
      }
      const TensorView q = seq_rows(a.q, call.first_row, call.num_seqs, call.tq);
      const TensorView out = seq_rows(a.out, call.first_row, call.num_seqs, call.tq);
      const DecodePlanKey key = plan_key(int64_t(i), memory, q, out);
      if (!step.decode_plans->find(key))
        step.decode_plans->add(key, prepare_decode(memory, tables, call, q, out));
    }
  }

  void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const override {
    const int64_t T = step.num_tokens, Hq = config_.num_heads, Hkv = config_.num_kv_heads, D = config_.head_dim;
    const Stream s = step.stream;
    const LayerMemory memory = step.storage->layer(layer);
    const Activations a = activations(step);
    const int64_t qw = q_width();
    if (qkv_) {
      qkv_->apply(h, step.view(a.q.data, act_dtype_, {T, Hq * qw + 2 * Hkv * D}), {}, s);
    } else {
      q_->apply(h, step.view(a.q.data, act_dtype_, {T, Hq * qw}), {}, s);
      k_->apply(h, step.view(a.k.data, act_dtype_, {T, Hkv * D}), {}, s);
      v_->apply(h, step.view(a.v.data, act_dtype_, {T, Hkv * D}), {}, s);
    }
    // Per head (Qwen3: dim D) or across the whole projected row (OLMo 2: dim heads * D), in place in the
    // [q|k|v] row's slices where the projections are stacked.
    auto norm_rows = [&](const std::optional<RmsNormCuda>& n, const TensorView& by_head) {
      if (!n) return;
      const TensorView rows = n->dim() == D ? by_head : whole_rows(by_head);
      n->forward(rows, rows, s);
    };
    norm_rows(q_norm_, a.q);
    norm_rows(k_norm_, a.k);
    if (rope_) rope_->apply(a.q, a.k, step.positions, s);
    if (config_.temperature_beta != 0.f)  // Llama 4 / Ministral 3: after RoPE, as AttentionLayer::scale_queries
      query_temperature_cuda(whole_rows(a.q), step.positions, config_.temperature_beta, config_.temperature_interval,
                             s);
    const PagedRowsCuda writes[2] = {{a.k, memory.k, memory.k_scale, "k", "k_cache", "k_scale"},
                                     {a.v, memory.v, memory.v_scale, "v", "v_cache", "v_scale"}};
    for (const PagedRowsCuda& w : writes) check_paged_rows_cuda(w);
    // Unchecked: the slots come from the pool's own bookkeeping (fill_batch_memory), not from a caller.
    write_paged_rows_cuda(writes, step.slot_mapping(memory.block_group), /*check_slots=*/false, s);
    attend(step, memory, a.q, a.k, a.v, a.out);
    if (config_.output_gate) sigmoid_gate_cuda(a.out, a.gate, a.out, s);
    o_.apply_add(step.view(a.out.data, act_dtype_, {T, Hq * D}), x, s);
  }

 private:
  void attend(const DeviceStep& step, const LayerMemory& memory, const TensorView& q, const TensorView& k,
              const TensorView& v, const TensorView& out) const {
    for (size_t i = 0; i < step.calls->size(); ++i) {
      const AttentionCall& call = (*step.calls)[i];
      if (call.kind == AttentionCall::Kind::prefill) {
        prefill(step, int64_t(i), prefill_problem(call, q, k, v, out));
      } else {
        decode(step, int64_t(i), memory, call, seq_rows(q, call.first_row, call.num_seqs, call.tq),
               seq_rows(out, call.first_row, call.num_seqs, call.tq));
      }
    }
  }

  // The elements of q_proj's output per head: q, or (Qwen3-Next / Qwen3.5's output gate) q then its gate.
  int64_t q_width() const { return config_.output_gate ? 2 * config_.head_dim : config_.head_dim; }

  // The step's q / k / v rows [T, heads, D] and the attention output, in the workspace: slices of one [q|k|v] row
  // where the projections are stacked, buffers of their own otherwise. With the output gate q and the gate are
  // strided views of q_proj's [q ; gate] heads, read in place (the norm, RoPE and attention take any token and
  // head strides).
  struct Activations {
    TensorView q, k, v, out;
    TensorView gate;  // [T, Hq, D]: set with the output gate only
  };
  Activations activations(const DeviceStep& step) const {
    const int64_t T = step.num_tokens, Hq = config_.num_heads, Hkv = config_.num_kv_heads, D = config_.head_dim;
    const DType a = act_dtype_;
    const size_t e = dtype_size(a);
    DeviceWorkspace& ws = *step.workspace;
    Activations r;
    const int64_t qw = q_width();
    if (qkv_) {
      const int64_t W = Hq * qw + 2 * Hkv * D;
      void* qkv = ws.get(kQkv, size_t(T * W) * e);
      r.q = head_rows(step, qkv, a, 0, W, qw, T, Hq, D);
      r.k = head_rows(step, qkv, a, Hq * qw, W, D, T, Hkv, D);
      r.v = head_rows(step, qkv, a, Hq * qw + Hkv * D, W, D, T, Hkv, D);
    } else {
      r.q = head_rows(step, ws.get(kQ, size_t(T * Hq * qw) * e), a, 0, Hq * qw, qw, T, Hq, D);
      r.k = step.view(ws.get(kK, size_t(T * Hkv * D) * e), a, {T, Hkv, D});
      r.v = step.view(ws.get(kV, size_t(T * Hkv * D) * e), a, {T, Hkv, D});
    }
    if (config_.output_gate) {
      r.gate = r.q;
      r.gate.data = static_cast<uint8_t*>(r.q.data) + size_t(D) * e;
    }
    r.out = step.view(ws.get(kOut, size_t(T * Hq * D) * e), a, {T, Hq, D});
    return r;
  }

  AttentionOptions options() const {
    AttentionOptions opts;
    opts.scale = config_.scale;
    opts.causal = true;
    opts.window = config_.window;
    opts.softcap = config_.softcap;
    opts.sinks = sinks_.empty() ? nullptr : sinks_.data();  // host [Hq]: a prefill uploads it, a decode plan carries it
    return opts;
  }

  DecodePlanKey plan_key(int64_t call, const LayerMemory& memory, const TensorView& q, const TensorView& out) const {
    DecodePlanKey key;
    key.call = call;
    key.block_group = memory.block_group;
    key.Hq = config_.num_heads, key.Hkv = config_.num_kv_heads, key.D = config_.head_dim;
    key.window = config_.window, key.scale = config_.scale, key.softcap = config_.softcap;
    key.sinks = sinks_.empty() ? nullptr : sinks_.data();  // the plan carries this layer's sink values
    key.q_dtype = q.dtype, key.o_dtype = out.dtype, key.kv_dtype = memory.k.dtype;
    key.q_strides = q.strides, key.o_strides = out.strides;
    key.k_strides = memory.k.strides, key.v_strides = memory.v.strides;
    key.ks_strides = memory.k_scale.strides, key.vs_strides = memory.v_scale.strides;
    return key;
  }

  // attention_decode's checks (block ids included) and the CUDA decode's plan for one call of this layer. The
  // call's table rows are widened to a whole number of kTableWidthStep blocks (-1 past each row's own, never
  // followed): the width is a launch parameter, and a table one block wider every block_size tokens would change
  // the step's graph signature (step_graphs.h) that often.
  PreparedDecodeCuda prepare_decode(const LayerMemory& memory, const BlockTables& tables, const AttentionCall& call,
                                    const TensorView& q, const TensorView& out) const {
    const int64_t width = (tables.max_blocks + kTableWidthStep - 1) / kTableWidthStep * kTableWidthStep;
    std::vector<int32_t> table(size_t(call.num_seqs * width), -1);
    for (int64_t i = 0; i < call.num_seqs; ++i) {
      const int32_t* row = tables.block_table(call.first_seq + i);  // the call's sequences' rows are consecutive
      std::copy(row, row + tables.max_blocks, table.begin() + i * width);
    }
    KvCacheView cache;
    cache.k = memory.k;
    cache.v = memory.v;
    cache.k_scale = memory.k_scale;
    cache.v_scale = memory.v_scale;
    cache.cache_seqlens = call.cache_seqlens.data();
    cache.block_table = table.data();  // copied into the plan's metadata: may go on return
    cache.max_blocks_per_seq = width;
    const DecodeProblem p = make_decode_problem(q, cache, out, options());
    check_cuda_decode(p);
    return prepare_attention_decode_cuda(p);
  }

  // The call's varlen prefill over this layer's rows of q / k / v / out, checked as attention_prefill checks it
  // (this layer's addresses included).
  AttentionProblem prefill_problem(const AttentionCall& call, const TensorView& q, const TensorView& k,
                                   const TensorView& v, const TensorView& out) const {
    const VarlenInfo varlen{call.cu_seqlens.data(), nullptr, call.num_seqs};
    auto rows = [&](const TensorView& t) { return token_rows(t, call.first_row, call.rows); };
    AttentionProblem p = make_prefill_problem(rows(q), rows(k), rows(v), rows(out), options(), varlen);
    check_cuda_prefill(p);
    return p;
  }

  // The prefill through the step's shared plans, as decode below: its work list came up in the step's copy.
  void prefill(const DeviceStep& step, int64_t call_index, const AttentionProblem& p) const {
    const StepDecodePlans::PrefillPlan& plan =
        step.decode_plans->prefill_plan(call_index, p, step, prepare_attention_prefill_cuda);
    launch_prepared_prefill_cuda(plan.prepared, plan.metadata, {p.q, p.k, p.v, p.o}, step.stream);
  }

  // The paged decode through the step's shared plans: prepared before the upload (prepare), or here for a step
  // that did not, then launched over this layer's tensors.
  void decode(const DeviceStep& step, int64_t call_index, const LayerMemory& memory, const AttentionCall& call,
              const TensorView& q, const TensorView& out) const {
    const DecodePlanKey key = plan_key(call_index, memory, q, out);
    const StepDecodePlans::Plan* plan = step.decode_plans->find(key);
    if (!plan)
      plan = &step.decode_plans->add_late(key, prepare_decode(memory, step.batch->tables(memory), call, q, out), step);
    const cuda_decode::DecodeTensors tensors{q.data, out.data, memory.k.data, memory.v.data,
                                             memory.k_scale.ptr<const float>(), memory.v_scale.ptr<const float>()};
    launch_prepared_decode_cuda(plan->prepared, plan->metadata, plan->partials, tensors, step.stream);
  }

  AttentionConfig config_;
  DType act_dtype_;
  std::optional<DeviceLinear> qkv_, q_, k_, v_;  // qkv_, or the three where they cannot be stacked
  DeviceLinear o_;
  std::vector<float> sinks_;                    // gpt-oss: [Hq] logits, empty without
  std::optional<RmsNormCuda> q_norm_, k_norm_;  // Qwen3 (per head), OLMo 2 (across heads)
  std::optional<RopeCuda> rope_;                // empty: a NoPE layer
};

}  // namespace

std::unique_ptr<DeviceMixer> make_device_attention(const AttentionLayer& attn, const DeviceLoad& load,
                                                   MixerScales scales) {
  return std::make_unique<DeviceAttention>(attn, load, scales);
}
#endif

}  // namespace attnzoo
