#include "models/cuda/decoder_cuda_runner.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/device_unreachable.h"
#include "core/error.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/embedding_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "models/cuda/decoder_cuda_plan.h"
#include "models/cuda/device_blocks.h"
#include "models/cuda/runner_step.h"
#include "models/cuda/step_decode_plans.h"
#include "models/cuda/step_graphs.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// The normed rows the projections read (the residual stream stays f32): bf16, so a bf16 checkpoint's GEMMs take
// one dtype on both sides (cuBLASLt where built) and read half the activation bytes.
constexpr DType kNormed = DType::bf16;

// DecoderBlock's parts on the device (decoder.h has the forms: no input norm in OLMo 2, post-sublayer norms in
// Gemma 2 / 3 and OLMo 2, Cohere's parallel blocks, MiniMax's postnorm residuals). Either sublayer may be absent
// (Nemotron-H's MLP-only and mixer-only layers, Mamba-2's blocks), with its norms.
struct DeviceBlock {
  std::optional<RmsNormCuda> input_norm, ffn_norm, post_mixer_norm, post_ffn_norm;
  std::unique_ptr<DeviceMixer> mixer;
  std::unique_ptr<DeviceFfn> ffn;
  bool parallel = false;
  // MiniMax's postnorm: x = alpha * x' + beta * sublayer(h), x' the f32 normed input (normed_residual) or x.
  bool normed_residual = false;
  float mixer_alpha = 1.f, mixer_beta = 1.f, ffn_alpha = 1.f, ffn_beta = 1.f;
  bool mixer_postnorm() const { return normed_residual || mixer_alpha != 1.f || mixer_beta != 1.f; }
  bool ffn_postnorm() const { return normed_residual || ffn_alpha != 1.f || ffn_beta != 1.f; }
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
  void grow(DeviceBuffer& b, size_t bytes) const { attnzoo::grow(b, device_, bytes); }
  // Everything a step's launches bake in besides what its one copy brings: shapes, calls, rows, every buffer's
  // and the pool's addresses, the decode plans' grids and parameters (step_graphs.h).
  std::vector<uint64_t> step_signature(const DeviceStep& step, std::span<const int64_t> rows,
                                       const CacheStorage& storage) const;

  Device device_;
  int64_t hidden_ = 0, vocab_ = 0;
  float embedding_scale_ = 1.f;
  // DecoderOptions; logits_scale_ 1 where the head folded it (a tied 16-bit head or GGUF blocks keep it). The
  // embedding multiplier stays a parameter of the gather, which costs nothing there (and the table may be the head's).
  float residual_scale_ = 1.f, logits_scale_ = 1.f, logit_softcap_ = 0.f;
  EmbeddingCuda embed_;
  std::vector<DeviceBlock> blocks_;
  RmsNormCuda norm_;
  DeviceLinear lm_head_;
  mutable DeviceWorkspace workspace_;
  mutable StepDecodePlans decode_plans_;
  // y_: a sublayer's output where it cannot add straight into the residual stream (a post norm, a residual
  // multiplier or a parallel block comes first); grown only where some block stages (staged_).
  mutable DeviceBuffer meta_, x_, h_, y_, picked_, picked_h_, logits_;
  bool staged_ = false;
  mutable std::vector<uint8_t> staging_;
  mutable DecodePadding padding_;  // a decode step padded to its bucket
  std::unique_ptr<StepGraphs> graphs_;
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
    d.parallel = b.parallel;
    d.normed_residual = b.residual_is_normed;
    d.mixer_alpha = b.mixer_alpha, d.mixer_beta = b.mixer_beta, d.ffn_alpha = b.ffn_alpha, d.ffn_beta = b.ffn_beta;
    if (b.mixer) {
      d.input_norm = upload_norm(b.input_norm, load);
      d.post_mixer_norm = upload_norm(b.post_mixer_norm, load);
      d.mixer = make_device_mixer(*b.mixer, load);
    }
    if (b.ffn) {
      d.ffn_norm = upload_norm(b.pre_ffn_norm, load);  // unused in a parallel block: its ffn reads the mixer's h
      d.post_ffn_norm = upload_norm(b.post_ffn_norm, load);
      d.ffn = make_device_ffn(*b.ffn, load);
    }
    staged_ = staged_ || d.parallel || d.post_mixer_norm || d.post_ffn_norm || residual_scale_ != 1.f ||
              d.mixer_postnorm() || d.ffn_postnorm();
    blocks_.push_back(std::move(d));
  }
  norm_ = RmsNormCuda(*p.norm, device, load.stream);
  // Graphs only over blocks known to replay correctly (DeviceMixer::replayable); the rest launch one by one. An
  // absent sublayer launches nothing. MLA replays its step plan (device_mla.cc; a pad row writes no latent). The
  // recurrent mixers that are decode in place in the pool's slots (device_conv_state.h), where a pad's state slot
  // -1 is skipped.
  const bool replayable = std::all_of(blocks_.begin(), blocks_.end(), [](const DeviceBlock& b) {
    return (!b.mixer || b.mixer->replayable()) && (!b.ffn || b.ffn->replayable());
  });
  graphs_ = std::make_unique<StepGraphs>(device, replayable && cuda_graphs_enabled());
  // A tied head over a 16-bit table multiplies by the embedding's device copy: the table goes up once.
  if (head_shares_embedding(p)) {
    const QuantMatrix& up = embed_.table();
    lm_head_ = DeviceLinear::borrowing(device_view(device, const_cast<void*>(up.data),
                                                   up.type == QuantType::F16 ? DType::f16 : DType::bf16,
                                                   {up.rows, up.cols}));
  } else {
    // The logits multiplier (Falcon-H1's lm_head_multiplier, Granite's, Cohere's) folded into the head's rows where
    // its weights can take it (device_weight_fold.h); a head over the embedding's table, or GGUF blocks, keeps it
    // for the epilogue.
    const bool fold = foldable(p.lm_head->matrix().type);
    lm_head_ = DeviceLinear(*p.lm_head, load, WeightFold::output(fold ? logits_scale_ : 1.f));
    if (fold) logits_scale_ = 1.f;
  }
  synchronize(load.stream);
  print_load_notices(rounded, *load.panel, device);
}

TensorView DecoderCudaRunner::run(const Batch& requested, std::span<const int64_t> requested_rows,
                                  const CacheStorage& storage) const {
  const RunnerStep run_step(device_, padding_, requested, requested_rows, graphs_->enabled());
  const Stream s = run_step.stream;
  const std::span<const int64_t> rows = run_step.rows;
  const Batch& batch = run_step.batch;
  const int64_t T = batch.num_tokens(), H = hidden_;

  // The step's metadata (the recurrent mixers' state slots included) and the attention layers' decode and prefill
  // plans (one per call and layer shape, shared by the layers of that shape), one copy up.
  const StepLayout layout = plan_step_layout(T, int64_t(batch.block_groups.size()), batch.num_sequences());
  pack_step(batch, layout, staging_);
  const std::vector<AttentionCall> calls = plan_attention_calls(batch.cu_seqlens, batch.context_lens);
  DeviceStep step;
  step.device = device_;
  step.stream = s;
  step.batch = &batch;
  step.storage = &storage;
  step.num_tokens = T;
  step.layout = &layout;
  step.calls = &calls;
  step.workspace = &workspace_;
  step.decode_plans = &decode_plans_;
  decode_plans_.begin(layout.bytes);
  for (size_t l = 0; l < blocks_.size(); ++l)
    if (blocks_[l].mixer) blocks_[l].mixer->prepare(step, int64_t(l));
  staging_.resize(decode_plans_.end());
  decode_plans_.pack(staging_);
  grow(meta_, staging_.size());
  copy_bytes(meta_.data(), device_, staging_.data(), Device::cpu(), staging_.size(), s);
  decode_plans_.bind(meta_.as<uint8_t>(), workspace_);
  step.meta = meta_.as<uint8_t>();
  step.positions = step.view(meta_.as<uint8_t>() + layout.positions, DType::i32, {T});

  const int64_t R = int64_t(rows.size());
  grow(x_, size_t(T * H) * 4);
  grow(h_, size_t(T * H) * dtype_size(kNormed));
  grow(picked_, size_t(R * H) * 4);
  grow(picked_h_, size_t(R * H) * dtype_size(kNormed));
  grow(logits_, size_t(R * vocab_) * 4);
  const TensorView x = step.view(x_.data(), DType::f32, {T, H});  // the residual stream
  const TensorView h = step.view(h_.data(), kNormed, {T, H});
  const TensorView ids = step.view(meta_.as<uint8_t>() + layout.tokens, DType::i32, {T});
  const size_t stream_bytes = size_t(T * H) * 4;
  if (staged_) grow(y_, stream_bytes);
  const TensorView y = step.view(y_.data(), DType::f32, {T, H});

  // Everything the step launches, on stream `cs`: what a step graph captures and replays.
  auto compute = [&](Stream cs) {
    step.stream = cs;
    embed_.lookup(ids, x, embedding_scale_, /*check_ids=*/false, cs);  // Model::forward checked the ids on the host
    // A block without a norm (OLMo 2) hands the projections the residual stream rounded to bf16.
    auto norm_or_round = [&](const std::optional<RmsNormCuda>& norm) {
      if (norm) {
        norm->forward(x, h, cs);
      } else {
        scale_softcap_cuda(x, h, 1.f, 0.f, cs);
      }
    };
    // A sublayer adds its output into the residual stream itself (its last GEMM accumulates) unless the output is
    // normed or scaled first: then it adds into a zeroed y, and x += residual_scale * post_norm(y), as the CPU.
    auto staged_output = [&] {
      zero_bytes(y_.data(), device_, stream_bytes, cs);
      return y;
    };
    auto add_staged = [&](const std::optional<RmsNormCuda>& post_norm, float alpha) {
      if (post_norm) post_norm->forward(y, y, cs);
      add_scaled_cuda(x, y, alpha, x, cs);
    };
    // DecoderModel's add_residual(alpha, beta) for a postnorm block: the stream becomes its own normed rows in
    // f32 (the CPU's h; `norm` in place, none: x itself), scaled by alpha, plus beta * residual_scale * y.
    auto add_postnorm = [&](const std::optional<RmsNormCuda>& post_norm, const std::optional<RmsNormCuda>& norm,
                            bool normed, float alpha, float beta) {
      if (post_norm) post_norm->forward(y, y, cs);
      if (normed && norm) norm->forward(x, x, cs);
      if (alpha != 1.f) scale_softcap_cuda(x, x, alpha, 0.f, cs);
      add_scaled_cuda(x, y, beta * residual_scale_, x, cs);
    };
    for (size_t l = 0; l < blocks_.size(); ++l) {
      const DeviceBlock& b = blocks_[l];
      if (b.parallel) {  // x += post_norm?(mixer(h)) + ffn(h), with no residual multiplier (DecoderModel's form)
        norm_or_round(b.input_norm);
        b.mixer->forward(step, int64_t(l), h, staged_output());
        if (b.post_mixer_norm) b.post_mixer_norm->forward(y, y, cs);
        b.ffn->forward(step, h, y);
        add_scaled_cuda(x, y, 1.f, x, cs);
        continue;
      }
      if (b.mixer) {
        norm_or_round(b.input_norm);
        if (b.mixer_postnorm()) {
          b.mixer->forward(step, int64_t(l), h, staged_output());
          add_postnorm(b.post_mixer_norm, b.input_norm, b.normed_residual, b.mixer_alpha, b.mixer_beta);
        } else if (b.post_mixer_norm || residual_scale_ != 1.f) {
          b.mixer->forward(step, int64_t(l), h, staged_output());
          add_staged(b.post_mixer_norm, residual_scale_);
        } else {
          b.mixer->forward(step, int64_t(l), h, x);
        }
      }
      if (!b.ffn) continue;
      norm_or_round(b.ffn_norm);
      if (b.ffn_postnorm()) {
        b.ffn->forward(step, h, staged_output());
        add_postnorm(b.post_ffn_norm, b.ffn_norm, b.normed_residual, b.ffn_alpha, b.ffn_beta);
      } else if (b.post_ffn_norm || residual_scale_ != 1.f) {
        b.ffn->forward(step, h, staged_output());
        add_staged(b.post_ffn_norm, residual_scale_);
      } else {
        b.ffn->forward(step, h, x);
      }
    }
    // Only the requested rows reach the final norm and the vocabulary projection: gathered by runs of
    // consecutive rows (usually one run, or one row per sequence).
    if (R == 0) return;
    gather_rows(x_, picked_, rows, size_t(H) * 4, device_, cs);
    const TensorView picked = step.view(picked_.data(), DType::f32, {R, H});
    const TensorView normed = step.view(picked_h_.data(), kNormed, {R, H});
    norm_.forward(picked, normed, cs);
    const TensorView logits = step.view(logits_.data(), DType::f32, {R, vocab_});
    lm_head_.apply(normed, logits, {}, cs);
    // DecoderModel's epilogue (Cohere / Granite's multiplier, Gemma 2's final softcap) on the rows sampled from.
    if (logits_scale_ != 1.f || logit_softcap_ > 0.f)
      scale_softcap_cuda(logits, logits, logits_scale_, logit_softcap_, cs);
  };

  // A step of cached sequences only (every call a paged decode: a serve loop's step) goes through the step
  // graphs; a step with a prefill call launches as it is (its work list's grid changes with every prompt).
  const bool decode_only = !calls.empty() && std::all_of(calls.begin(), calls.end(), [](const AttentionCall& c) {
    return c.kind == AttentionCall::Kind::decode;
  });
  run_step.launch(*graphs_, decode_only, [&] { return step_signature(step, rows, storage); }, compute);
  return run_step.logits(device_, logits_.data(), vocab_);
}

std::vector<uint64_t> DecoderCudaRunner::step_signature(const DeviceStep& step, std::span<const int64_t> rows,
                                                        const CacheStorage& storage) const {
  auto ptr = [](const void* p) { return uint64_t(reinterpret_cast<uintptr_t>(p)); };
  std::vector<uint64_t> sig = step_signature_start(
      step.num_tokens, rows, {&meta_, &x_, &h_, &y_, &picked_, &picked_h_, &logits_}, workspace_.generation());
  for (const AttentionCall& c : *step.calls)
    for (int64_t v : {int64_t(c.kind), c.first_seq, c.num_seqs, c.first_row, c.rows, c.tq}) sig.push_back(uint64_t(v));
  for (size_t l = 0; l < blocks_.size(); ++l) {
    if (!blocks_[l].mixer) continue;  // no pool memory
    const LayerMemory m = storage.layer(int64_t(l));
    for (const void* p : {m.k.data, m.v.data, m.k_scale.data, m.v_scale.data, static_cast<void*>(m.states)})
      sig.push_back(ptr(p));
    sig.push_back(uint64_t(m.block_group));
  }
  for (const std::vector<size_t>* offsets : {&step.layout->slot_mapping}) sig.insert(sig.end(), offsets->begin(), offsets->end());
  sig.push_back(step.layout->positions);
  decode_plans_.append_signature(sig);
  return sig;
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
