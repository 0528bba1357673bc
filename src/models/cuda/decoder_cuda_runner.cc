#include "models/cuda/decoder_cuda_runner.h"

#include <cstdio>
#include <optional>
#include <vector>

#include "core/device_unreachable.h"
#include "core/error.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/embedding_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "models/cuda/decoder_cuda_plan.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// DecoderBlock's parts on the device (decoder.h has the forms: no input norm in OLMo 2, post-sublayer norms in
// Gemma 2 / 3 and OLMo 2, Cohere's parallel blocks).
struct DeviceBlock {
  std::optional<RmsNormCuda> input_norm, ffn_norm, post_mixer_norm, post_ffn_norm;
  std::unique_ptr<DeviceMixer> mixer;
  std::unique_ptr<DeviceFfn> ffn;
  bool parallel = false;
};

std::optional<RmsNormCuda> upload_norm(const std::optional<RmsNorm>& n, const DeviceLoad& load) {
  if (!n) return std::nullopt;
  return RmsNormCuda(*n, load.device, load.stream);
}

class DecoderCudaRunner final : public DeviceRunner {
 public:
  DecoderCudaRunner(const DecoderParts& p, Device device, DType kv_dtype);
  TensorView run(const Batch& batch, std::span<const int64_t> rows, const CacheStorage& storage) const override;

 private:
  // A step's buffers are sized from its token count: grown when a bigger step comes, never shrunk.
  void grow(DeviceBuffer& b, size_t bytes) const {
    if (b.bytes() < bytes) b = DeviceBuffer(device_, bytes);
  }

  Device device_;
  int64_t hidden_ = 0, vocab_ = 0;
  float embedding_scale_ = 1.f;
  float residual_scale_ = 1.f, logits_scale_ = 1.f, logit_softcap_ = 0.f;  // DecoderOptions
  EmbeddingCuda embed_;
  std::vector<DeviceBlock> blocks_;
  RmsNormCuda norm_;
  DeviceLinear lm_head_;
  mutable DeviceWorkspace workspace_;
  // y_: a sublayer's output where it cannot add straight into the residual stream (a post norm, a residual
  // multiplier or a parallel block comes first).
  mutable DeviceBuffer meta_, x_, h_, y_, picked_, logits_;
  mutable std::vector<uint8_t> staging_;
};

DecoderCudaRunner::DecoderCudaRunner(const DecoderParts& p, Device device, DType kv_dtype)
    : device_(device),
      hidden_(p.info->hidden_size),
      vocab_(p.embed->vocab_size()),
      embedding_scale_(p.options->embedding_scale),
      residual_scale_(p.options->residual_scale),
      logits_scale_(p.options->logits_scale),
      logit_softcap_(p.options->final_logit_softcap),
      workspace_(device) {
  const DeviceGuard guard(device);
  WeightRounding rounded;
  const DeviceLoad load{device, current_stream(), kv_dtype == DType::f16 ? DType::f16 : DType::bf16, &rounded,
                        std::make_shared<DequantPanel>(DequantPanel{device, {}})};
  embed_ = make_device_embedding(*p.embed, load);
  for (const DecoderBlock& b : *p.blocks) {
    DeviceBlock d;
    d.input_norm = upload_norm(b.input_norm, load);
    d.ffn_norm = upload_norm(b.pre_ffn_norm, load);
    d.post_mixer_norm = upload_norm(b.post_mixer_norm, load);
    d.post_ffn_norm = upload_norm(b.post_ffn_norm, load);
    d.parallel = b.parallel;
    d.mixer = make_device_mixer(*b.mixer, load);
    d.ffn = make_device_ffn(*b.ffn, load);
    blocks_.push_back(std::move(d));
  }
  norm_ = RmsNormCuda(*p.norm, device, load.stream);
  lm_head_ = DeviceLinear(*p.lm_head, load);
  synchronize(load.stream);
  if (rounded.tensors > 0)
    std::fprintf(stderr,
                 "attnzoo: %lld f32 weight tensors rounded to bf16 on %s (%.1f MiB there instead of %.1f; 8 "
                 "significant bits instead of 24: logits agree with the CPU's f32 run to bf16 tolerance)\n",
                 static_cast<long long>(rounded.tensors), device.str().c_str(), double(rounded.f32_bytes) / 2 / (1 << 20),
                 double(rounded.f32_bytes) / (1 << 20));
  std::fputs(expansion_notice(rounded, device.str()).c_str(), stderr);
  std::fputs(panel_notice(load.panel->buffer.bytes(), device.str()).c_str(), stderr);
}

TensorView DecoderCudaRunner::run(const Batch& batch, std::span<const int64_t> rows,
                                  const CacheStorage& storage) const {
  const DeviceGuard guard(device_);
  const Stream s = current_stream();
  const int64_t T = batch.num_tokens(), H = hidden_;

  // The step's metadata, one copy up.
  const StepLayout layout = plan_step_layout(T, int64_t(batch.block_groups.size()));
  pack_step(batch, layout, staging_);
  grow(meta_, layout.bytes);
  copy_bytes(meta_.data(), device_, staging_.data(), Device::cpu(), layout.bytes, s);
  const std::vector<AttentionCall> calls = plan_attention_calls(batch.cu_seqlens, batch.context_lens);
  DeviceStep step;
  step.device = device_;
  step.stream = s;
  step.batch = &batch;
  step.storage = &storage;
  step.num_tokens = T;
  step.meta = meta_.as<uint8_t>();
  step.layout = &layout;
  step.calls = &calls;
  step.positions = step.view(meta_.as<uint8_t>() + layout.positions, DType::i32, {T});
  step.workspace = &workspace_;

  grow(x_, size_t(T * H) * 4);
  grow(h_, size_t(T * H) * 4);
  const TensorView x = step.view(x_.data(), DType::f32, {T, H});  // the residual stream
  const TensorView h = step.view(h_.data(), DType::f32, {T, H});
  const TensorView ids = step.view(meta_.as<uint8_t>() + layout.tokens, DType::i32, {T});
  embed_.lookup(ids, x, embedding_scale_, /*check_ids=*/false, s);  // Model::forward checked the ids on the host
  const size_t stream_bytes = size_t(T * H) * 4;
  auto norm_or_copy = [&](const std::optional<RmsNormCuda>& norm) {
    if (norm) {
      norm->forward(x, h, s);
    } else {
      copy_bytes(h_.data(), device_, x_.data(), device_, stream_bytes, s);
    }
  };
  // A sublayer adds its output into the residual stream itself (its last GEMM accumulates) unless the output is
  // normed or scaled first: then it adds into a zeroed y, and x += residual_scale * post_norm(y), as the CPU.
  TensorView y;
  auto staged_output = [&] {
    grow(y_, stream_bytes);
    zero_bytes(y_.data(), device_, stream_bytes, s);
    y = step.view(y_.data(), DType::f32, {T, H});
    return y;
  };
  auto add_staged = [&](const std::optional<RmsNormCuda>& post_norm, float alpha) {
    if (post_norm) post_norm->forward(y, y, s);
    add_scaled_cuda(x, y, alpha, x, s);
  };
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const DeviceBlock& b = blocks_[l];
    norm_or_copy(b.input_norm);
    if (b.parallel) {  // x += post_norm?(mixer(h)) + ffn(h), with no residual multiplier (DecoderModel's form)
      b.mixer->forward(step, int64_t(l), h, staged_output());
      if (b.post_mixer_norm) b.post_mixer_norm->forward(y, y, s);
      b.ffn->forward(step, h, y);
      add_scaled_cuda(x, y, 1.f, x, s);
      continue;
    }
    if (b.post_mixer_norm || residual_scale_ != 1.f) {
      b.mixer->forward(step, int64_t(l), h, staged_output());
      add_staged(b.post_mixer_norm, residual_scale_);
    } else {
      b.mixer->forward(step, int64_t(l), h, x);
    }
    norm_or_copy(b.ffn_norm);
    if (b.post_ffn_norm || residual_scale_ != 1.f) {
      b.ffn->forward(step, h, staged_output());
      add_staged(b.post_ffn_norm, residual_scale_);
    } else {
      b.ffn->forward(step, h, x);
    }
  }

  // Only the requested rows reach the final norm and the vocabulary projection: gathered by runs of
  // consecutive rows (usually one run, or one row per sequence).
  const int64_t R = int64_t(rows.size());
  if (R == 0) return {};
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
  const TensorView picked = step.view(picked_.data(), DType::f32, {R, H});
  norm_.forward(picked, picked, s);
  const TensorView out = step.view(logits_.data(), DType::f32, {R, vocab_});
  lm_head_.apply(picked, out, {}, s);
  if (logits_scale_ != 1.f || logit_softcap_ > 0.f) scale_softcap_cuda(out, out, logits_scale_, logit_softcap_, s);
  return out;
}

}  // namespace
#endif

std::unique_ptr<DeviceRunner> make_decoder_cuda_runner(const DecoderParts& parts, Device device, DType kv_dtype) {
  check_decoder_runs_on_cuda(parts, kv_dtype);
#if ATTNZOO_WITH_CUDA
  return std::make_unique<DecoderCudaRunner>(parts, device, kv_dtype);
#else
  (void)kv_dtype;
  throw device_unreachable("device", device);
#endif
}

}  // namespace attnzoo
