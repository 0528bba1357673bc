#include "models/cuda/decoder_cuda_runner.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "core/convert.h"
#include "core/device_unreachable.h"
#include "core/error.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/cuda/kv_write_cuda.h"
#include "kernels/softmax/decode.h"
#include "layers/attention_layer.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/embedding_cuda.h"
#include "layers/cuda/gemm_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/rope_cuda.h"
#include "layers/mlp.h"
#include "models/cuda/decoder_cuda_plan.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

TensorView on(Device device, void* data, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView t = TensorView::contiguous(data, dtype, shape);
  t.device = device;
  return t;
}

// A projection on the device as gemm_cuda reads it: W [out, in] bf16 / f16, bias f32 [out] or none.
struct DeviceLinear {
  DeviceBuffer weight, bias_bytes;
  TensorView w, bias;
  const TensorView* bias_or_null() const { return bias.empty() ? nullptr : &bias; }
};

// What rounding f32 checkpoints to bf16 cost, for the one notice at load.
struct Rounded {
  int64_t tensors = 0;
  uint64_t f32_bytes = 0;
};

DeviceLinear upload_linear(const Linear& l, Device device, Rounded& rounded) {
  const QuantMatrix& m = l.matrix();  // F32 / BF16 / F16: check_decoder_runs_on_cuda refused the rest
  const int64_t out = m.rows, in = m.cols;
  DeviceLinear d;
  d.weight = DeviceBuffer(device, size_t(out * in) * 2);
  std::vector<uint16_t> rows(size_t(out * in));
  for (int64_t r = 0; r < out; ++r) {
    uint16_t* dst = rows.data() + r * in;
    if (m.type == QuantType::F32)
      convert_from_f32(reinterpret_cast<const float*>(m.row(r)), dst, DType::bf16, size_t(in));
    else
      std::memcpy(dst, m.row(r), size_t(in) * 2);
  }
  if (m.type == QuantType::F32) {
    ++rounded.tensors;
    rounded.f32_bytes += uint64_t(out * in) * 4;
  }
  d.weight.upload(rows.data(), d.weight.bytes());
  d.w = on(device, d.weight.data(), m.type == QuantType::F16 ? DType::f16 : DType::bf16, {out, in});
  if (l.has_bias()) {
    d.bias_bytes = DeviceBuffer(device, size_t(out) * sizeof(float));
    d.bias_bytes.upload(l.bias().data(), d.bias_bytes.bytes());
    d.bias = on(device, d.bias_bytes.data(), DType::f32, {out});
  }
  return d;
}

struct DeviceLayer {
  AttentionConfig config;
  RmsNormCuda input_norm, ffn_norm;
  std::optional<RmsNormCuda> q_norm, k_norm;  // Qwen3
  std::optional<RopeCuda> rope;               // empty: a NoPE layer
  DeviceLinear q, k, v, o, gate, up, down;
  Activation act = Activation::silu;
  int64_t intermediate = 0;
};

class DecoderCudaRunner final : public DeviceRunner {
 public:
  DecoderCudaRunner(const DecoderParts& p, Device device, DType kv_dtype);
  void run(const Batch& batch, std::span<const int64_t> rows, const CacheStorage& storage,
           float* logits) const override;

 private:
  // A step's buffers are sized from its token count: grown when a bigger step comes, never shrunk.
  void grow(DeviceBuffer& b, size_t bytes) const {
    if (b.bytes() < bytes) b = DeviceBuffer(device_, bytes);
  }
  void attend(const std::vector<AttentionCall>& calls, const Batch& batch, const LayerMemory& memory,
              const AttentionConfig& c) const;

  Device device_;
  DType act_dtype_ = DType::bf16;  // q, k, v and the attention output: the cache's 16-bit dtype
  int64_t hidden_ = 0, vocab_ = 0, q_width_ = 0, kv_width_ = 0, intermediate_ = 0;
  float embedding_scale_ = 1.f;
  EmbeddingCuda embed_;
  std::vector<DeviceLayer> layers_;
  RmsNormCuda norm_;
  DeviceLinear lm_head_;
  mutable DeviceBuffer meta_, x_, h_, q_, k_, v_, attn_, gate_, up_, picked_, logits_;
  mutable std::vector<uint8_t> staging_;
};

DecoderCudaRunner::DecoderCudaRunner(const DecoderParts& p, Device device, DType kv_dtype)
    : device_(device),
      act_dtype_(kv_dtype == DType::f16 ? DType::f16 : DType::bf16),
      hidden_(p.info->hidden_size),
      vocab_(p.embed->vocab_size()),
      embedding_scale_(p.options->embedding_scale) {
  const DeviceGuard guard(device);
  const Stream s = current_stream();
  Rounded rounded;
  embed_ = EmbeddingCuda(*p.embed, device, s);
  for (const DecoderBlock& b : *p.blocks) {
    const auto& attn = dynamic_cast<const AttentionLayer&>(*b.mixer);
    const auto& mlp = dynamic_cast<const GatedMlp&>(*b.ffn);
    DeviceLayer l;
    l.config = attn.config();
    l.input_norm = RmsNormCuda(*b.input_norm, device, s);
    l.ffn_norm = RmsNormCuda(*b.pre_ffn_norm, device, s);
    if (attn.q_norm()) l.q_norm.emplace(*attn.q_norm(), device, s);
    if (attn.k_norm()) l.k_norm.emplace(*attn.k_norm(), device, s);
    if (attn.rope().config().type != "none") l.rope.emplace(attn.rope(), device, s);
    l.q = upload_linear(attn.q_proj(), device, rounded);
    l.k = upload_linear(attn.k_proj(), device, rounded);
    l.v = upload_linear(attn.v_proj(), device, rounded);
    l.o = upload_linear(attn.o_proj(), device, rounded);
    l.gate = upload_linear(mlp.gate_proj(), device, rounded);
    l.up = upload_linear(mlp.up_proj(), device, rounded);
    l.down = upload_linear(mlp.down_proj(), device, rounded);
    l.act = mlp.activation();
    l.intermediate = mlp.intermediate();
    q_width_ = std::max(q_width_, l.config.num_heads * l.config.head_dim);
    kv_width_ = std::max(kv_width_, l.config.num_kv_heads * l.config.head_dim);
    intermediate_ = std::max(intermediate_, l.intermediate);
    layers_.push_back(std::move(l));
  }
  norm_ = RmsNormCuda(*p.norm, device, s);
  lm_head_ = upload_linear(*p.lm_head, device, rounded);
  synchronize(s);  // the host copies above are freed on return
  if (rounded.tensors > 0)
    std::fprintf(stderr,
                 "attnzoo: %lld f32 weight tensors rounded to bf16 on %s (%.1f MiB there instead of %.1f; 8 "
                 "significant bits instead of 24: logits agree with the CPU's f32 run to bf16 tolerance)\n",
                 static_cast<long long>(rounded.tensors), device.str().c_str(), double(rounded.f32_bytes) / 2 / (1 << 20),
                 double(rounded.f32_bytes) / (1 << 20));
}

void DecoderCudaRunner::attend(const std::vector<AttentionCall>& calls, const Batch& batch, const LayerMemory& memory,
                               const AttentionConfig& c) const {
  const int64_t Hq = c.num_heads, Hkv = c.num_kv_heads, D = c.head_dim;
  const size_t e = dtype_size(act_dtype_);
  auto* q = q_.as<uint8_t>();
  auto* k = k_.as<uint8_t>();
  auto* v = v_.as<uint8_t>();
  auto* out = attn_.as<uint8_t>();
  AttentionOptions opts;
  opts.scale = c.scale;
  opts.causal = true;
  opts.window = c.window;
  opts.softcap = c.softcap;
  const BlockTables& tables = batch.tables(memory);
  for (const AttentionCall& call : calls) {
    const size_t q_at = size_t(call.first_row * Hq * D) * e, kv_at = size_t(call.first_row * Hkv * D) * e;
    if (call.kind == AttentionCall::Kind::prefill) {
      const VarlenInfo varlen{call.cu_seqlens.data(), nullptr, call.num_seqs};
      attention_prefill(on(device_, q + q_at, act_dtype_, {call.rows, Hq, D}),
                        on(device_, k + kv_at, act_dtype_, {call.rows, Hkv, D}),
                        on(device_, v + kv_at, act_dtype_, {call.rows, Hkv, D}),
                        on(device_, out + q_at, act_dtype_, {call.rows, Hq, D}), opts, varlen);
    } else {
      KvCacheView cache;
      cache.k = memory.k;
      cache.v = memory.v;
      cache.k_scale = memory.k_scale;
      cache.v_scale = memory.v_scale;
      cache.cache_seqlens = call.cache_seqlens.data();
      cache.block_table = tables.block_table(call.first_seq);  // the call's sequences' rows are consecutive
      cache.max_blocks_per_seq = tables.max_blocks;
      attention_decode(on(device_, q + q_at, act_dtype_, {call.num_seqs, call.tq, Hq, D}), cache,
                       on(device_, out + q_at, act_dtype_, {call.num_seqs, call.tq, Hq, D}), opts);
    }
  }
}

void DecoderCudaRunner::run(const Batch& batch, std::span<const int64_t> rows, const CacheStorage& storage,
                            float* logits) const {
  const DeviceGuard guard(device_);
  const Stream s = current_stream();
  const int64_t T = batch.num_tokens(), H = hidden_, I = intermediate_;
  const size_t e = dtype_size(act_dtype_);

  // The step's metadata, one copy up.
  const StepLayout layout = plan_step_layout(T, int64_t(batch.block_groups.size()));
  pack_step(batch, layout, staging_);
  grow(meta_, layout.bytes);
  copy_bytes(meta_.data(), device_, staging_.data(), Device::cpu(), layout.bytes, s);
  auto* meta = meta_.as<uint8_t>();
  const TensorView ids = on(device_, meta + layout.tokens, DType::i32, {T});
  const TensorView positions = on(device_, meta + layout.positions, DType::i32, {T});
  const std::vector<AttentionCall> calls = plan_attention_calls(batch.cu_seqlens, batch.context_lens);

  grow(x_, size_t(T * H) * 4);
  grow(h_, size_t(T * H) * 4);
  grow(q_, size_t(T * q_width_) * e);
  grow(k_, size_t(T * kv_width_) * e);
  grow(v_, size_t(T * kv_width_) * e);
  grow(attn_, size_t(T * q_width_) * e);
  grow(gate_, size_t(T * I) * 4);
  grow(up_, size_t(T * I) * 4);
  const TensorView x = on(device_, x_.data(), DType::f32, {T, H});  // the residual stream
  const TensorView h = on(device_, h_.data(), DType::f32, {T, H});
  GemmOptions add_into;
  add_into.accumulate = true;  // the output projections add into the residual stream: no separate add

  embed_.lookup(ids, x, embedding_scale_, /*check_ids=*/false, s);  // Model::forward checked the ids on the host
  for (size_t l = 0; l < layers_.size(); ++l) {
    const DeviceLayer& L = layers_[l];
    const AttentionConfig& c = L.config;
    const int64_t Hq = c.num_heads, Hkv = c.num_kv_heads, D = c.head_dim;
    const LayerMemory memory = storage.layer(int64_t(l));
    L.input_norm.forward(x, h, s);
    const TensorView q = on(device_, q_.data(), act_dtype_, {T, Hq * D});
    const TensorView k = on(device_, k_.data(), act_dtype_, {T, Hkv * D});
    const TensorView v = on(device_, v_.data(), act_dtype_, {T, Hkv * D});
    gemm_cuda(h, L.q.w, L.q.bias_or_null(), q, {}, s);
    gemm_cuda(h, L.k.w, L.k.bias_or_null(), k, {}, s);
    gemm_cuda(h, L.v.w, L.v.bias_or_null(), v, {}, s);
    const TensorView q3 = on(device_, q_.data(), act_dtype_, {T, Hq, D});
    const TensorView k3 = on(device_, k_.data(), act_dtype_, {T, Hkv, D});
    const TensorView v3 = on(device_, v_.data(), act_dtype_, {T, Hkv, D});
    if (L.q_norm) L.q_norm->forward(q3, q3, s);
    if (L.k_norm) L.k_norm->forward(k3, k3, s);
    if (L.rope) L.rope->apply(q3, k3, positions, s);
    const PagedRowsCuda writes[2] = {{k3, memory.k, memory.k_scale, "k", "k_cache", "k_scale"},
                                     {v3, memory.v, memory.v_scale, "v", "v_cache", "v_scale"}};
    for (const PagedRowsCuda& w : writes) check_paged_rows_cuda(w);
    // Unchecked: the slots come from the pool's own bookkeeping (fill_batch_memory), not from a caller.
    write_paged_rows_cuda(writes,
                          reinterpret_cast<const int64_t*>(meta + layout.slot_mapping[size_t(memory.block_group)]),
                          /*check_slots=*/false, s);
    attend(calls, batch, memory, c);
    gemm_cuda(on(device_, attn_.data(), act_dtype_, {T, Hq * D}), L.o.w, L.o.bias_or_null(), x, add_into, s);

    L.ffn_norm.forward(x, h, s);
    const TensorView gate = on(device_, gate_.data(), DType::f32, {T, L.intermediate});
    const TensorView up = on(device_, up_.data(), DType::f32, {T, L.intermediate});
    gemm_cuda(h, L.gate.w, L.gate.bias_or_null(), gate, {}, s);
    gemm_cuda(h, L.up.w, L.up.bias_or_null(), up, {}, s);
    gated_activation_cuda(L.act, gate, up, gate, s);
    gemm_cuda(gate, L.down.w, L.down.bias_or_null(), x, add_into, s);
  }

  // Only the requested rows reach the final norm and the vocabulary projection: gathered by runs of
  // consecutive rows (usually one run, or one row per sequence).
  const int64_t R = int64_t(rows.size());
  if (R == 0) return;
  grow(picked_, size_t(R * H) * 4);
  grow(logits_, size_t(R * vocab_) * 4);
  const size_t row_bytes = size_t(H) * 4;
  for (int64_t i = 0; i < R;) {
    int64_t n = 1;
    while (i + n < R && rows[size_t(i + n)] == rows[size_t(i)] + n) ++n;
    copy_bytes(picked_.as<uint8_t>() + size_t(i) * row_bytes, device_, x_.as<uint8_t>() + size_t(rows[size_t(i)]) * row_bytes,
               device_, size_t(n) * row_bytes, s);
    i += n;
  }
  const TensorView picked = on(device_, picked_.data(), DType::f32, {R, H});
  norm_.forward(picked, picked, s);
  const TensorView out = on(device_, logits_.data(), DType::f32, {R, vocab_});
  gemm_cuda(picked, lm_head_.w, lm_head_.bias_or_null(), out, {}, s);
  copy_bytes(logits, Device::cpu(), logits_.data(), device_, size_t(R * vocab_) * 4, s);  // waits for the step
}

}  // namespace
#endif

std::unique_ptr<DeviceRunner> make_decoder_cuda_runner(const DecoderParts& parts, Device device, DType kv_dtype) {
  check_decoder_runs_on_cuda(parts);
#if ATTNZOO_WITH_CUDA
  return std::make_unique<DecoderCudaRunner>(parts, device, kv_dtype);
#else
  (void)kv_dtype;
  throw device_unreachable("device", device);
#endif
}

}  // namespace attnzoo
