#include "models/cuda/decoder_cuda_runner.h"

#include <cstdio>
#include <vector>

#include "core/device_unreachable.h"
#include "core/error.h"
#include "layers/cuda/embedding_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "models/cuda/decoder_cuda_plan.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Either sublayer may be absent (Nemotron-H's MLP-only and mixer-only layers, Mamba-2's blocks), with its norm.
struct DeviceBlock {
  RmsNormCuda input_norm, ffn_norm;
  std::unique_ptr<DeviceMixer> mixer;
  std::unique_ptr<DeviceFfn> ffn;
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

  Device device_;
  int64_t hidden_ = 0, vocab_ = 0;
  float embedding_scale_ = 1.f;
  EmbeddingCuda embed_;
  std::vector<DeviceBlock> blocks_;
  RmsNormCuda norm_;
  DeviceLinear lm_head_;
  mutable DeviceWorkspace workspace_;
  mutable DeviceBuffer meta_, x_, h_, picked_, logits_;
  mutable std::vector<uint8_t> staging_;
};

DecoderCudaRunner::DecoderCudaRunner(const DecoderParts& p, Device device, DType kv_dtype)
    : device_(device),
      hidden_(p.info->hidden_size),
      vocab_(p.embed->vocab_size()),
      embedding_scale_(p.options->embedding_scale),
      workspace_(device) {
  const DeviceGuard guard(device);
  WeightRounding rounded;
  const DeviceLoad load{device, current_stream(), kv_dtype == DType::f16 ? DType::f16 : DType::bf16, &rounded};
  embed_ = EmbeddingCuda(*p.embed, device, load.stream);
  for (const DecoderBlock& b : *p.blocks) {
    DeviceBlock d;
    if (b.mixer) {
      d.input_norm = RmsNormCuda(*b.input_norm, device, load.stream);
      d.mixer = make_device_mixer(*b.mixer, load);
    }
    if (b.ffn) {
      d.ffn_norm = RmsNormCuda(*b.pre_ffn_norm, device, load.stream);
      d.ffn = make_device_ffn(*b.ffn, load);
    }
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
}

void DecoderCudaRunner::run(const Batch& batch, std::span<const int64_t> rows, const CacheStorage& storage,
                            float* logits) const {
  const DeviceGuard guard(device_);
  const Stream s = current_stream();
  const int64_t T = batch.num_tokens(), H = hidden_;

  // The step's metadata, one copy up.
  const StepLayout layout = plan_step_layout(T, int64_t(batch.block_groups.size()), batch.num_sequences());
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
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const DeviceBlock& b = blocks_[l];
    if (b.mixer) {
      b.input_norm.forward(x, h, s);
      b.mixer->forward(step, int64_t(l), h, x);
    }
    if (b.ffn) {
      b.ffn_norm.forward(x, h, s);
      b.ffn->forward(step, h, x);
    }
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
  const TensorView picked = step.view(picked_.data(), DType::f32, {R, H});
  norm_.forward(picked, picked, s);
  const TensorView out = step.view(logits_.data(), DType::f32, {R, vocab_});
  lm_head_.apply(picked, out, {}, s);
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
