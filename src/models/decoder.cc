#include "models/decoder.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <span>
#include <vector>

#include "core/dispatch_timeline.h"
#include "loader/load_error.h"
#include "models/cuda/decoder_cuda_runner.h"
#include "models/hf_config.h"
#include "models/output_head.h"

namespace attnzoo {

namespace {

std::string shape_text(std::span<const int64_t> shape) {
  std::string s = "[";
  for (int64_t d : shape) s += (s.size() > 1 ? ", " : "") + std::to_string(d);
  return s + "]";
}

void check_shape(const ModelFiles& files, const std::string& name, std::span<const int64_t> got,
                 std::initializer_list<int64_t> want) {
  if (std::equal(got.begin(), got.end(), want.begin(), want.end())) return;
  throw LoadError(files.source(name) + ": tensor '" + name + "' has shape " + shape_text(got) + ", expected " +
                  shape_text(std::span(want.begin(), want.size())));
}

}  // namespace

TensorView weight(const ModelFiles& files, const std::string& name, std::initializer_list<int64_t> shape) {
  const TensorView t = files.tensor(name);
  check_shape(files, name, std::span(t.shape.data(), size_t(t.ndim)), shape);
  // The layers widen weights to f32 as they read them; an integer tensor (safetensors I32 / I64 / U8, GGUF I32)
  // is no float weight, and read as one it would be zeros.
  if (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16)
    throw LoadError(files.source(name) + ": tensor '" + name + "': dtype " + dtype_name(t.dtype) +
                    ", expected float32, bfloat16 or float16");
  return t;
}

TensorView byte_weight(const ModelFiles& files, const std::string& name, std::initializer_list<int64_t> shape,
                       const char* holds) {
  const TensorView t = files.tensor(name);
  check_shape(files, name, std::span(t.shape.data(), size_t(t.ndim)), shape);
  if (t.dtype != DType::u8)
    throw LoadError(files.source(name) + ": tensor '" + name + "': dtype " + dtype_name(t.dtype) + ", expected U8 (" +
                    holds + ")");
  return t;
}

StoredTensor stored_weight(const ModelFiles& files, const std::string& name, std::initializer_list<int64_t> shape) {
  StoredTensor t = files.stored(name);
  check_shape(files, name, t.shape, shape);
  return t;
}

TensorView optional_weight(const ModelFiles& files, const std::string& name, std::initializer_list<int64_t> shape) {
  return files.has(name) ? weight(files, name, shape) : TensorView{};
}

ModelInfo read_model_info(const ModelFiles& files, const Config& c, const LoadOptions& options,
                          const std::string& default_model_type, bool with_intermediate) {
  return read_model_info(files.config(), c, options, default_model_type, with_intermediate);
}

ModelInfo read_model_info(const Config& root, const Config& c, const LoadOptions& options,
                          const std::string& default_model_type, bool with_intermediate,
                          std::optional<int64_t> num_layers) {
  ModelInfo info;
  info.architecture = root.get_string_list("architectures")[0];
  info.model_type = c.get_string_or("model_type", default_model_type);
  info.hidden_size = c.get_int("hidden_size");
  if (with_intermediate) info.intermediate_size = c.get_int("intermediate_size");
  info.num_layers = num_layers ? *num_layers : c.get_int("num_hidden_layers");
  info.num_heads = c.get_int("num_attention_heads");
  info.num_kv_heads = c.get_int_or("num_key_value_heads", info.num_heads);
  info.head_dim = c.get_int_or("head_dim", info.hidden_size / std::max<int64_t>(1, info.num_heads));
  info.vocab_size = c.get_int("vocab_size");
  info.max_position_embeddings = context_length(c);
  info.checkpoint_dtype = c.dtype();
  info.weights = options.weights;
  return info;
}

ModelInfo read_dense_model_info(const Config& root, const Config& c, const LoadOptions& options,
                                const std::string& default_model_type, std::optional<int64_t> num_layers) {
  ModelInfo info = read_model_info(root, c, options, default_model_type, /*with_intermediate=*/true, num_layers);
  if (info.hidden_size <= 0 || info.intermediate_size <= 0 || info.num_layers <= 0 || info.num_heads <= 0 ||
      info.num_kv_heads <= 0 || info.head_dim <= 0 || info.vocab_size <= 0)
    throw LoadError(c.source() + ": sizes (hidden_size, intermediate_size, num_*, head_dim, vocab_size) must be positive");
  return info;
}

void count_checkpoint(const ModelFiles& files, ModelInfo& info) {
  std::map<std::string, int> formats;  // a GGUF's storage formats, tensors of each
  for (const auto& t : files.names()) {
    info.parameter_count += files.numel(t);
    info.checkpoint_bytes += files.nbytes(t);
    if (files.gguf()) ++formats[quant_type_name(files.stored(t).type)];
  }
  // A GGUF mixes formats (Q4_1 projections, a Q8_0 embedding, F32 norms): name them all, most used first.
  if (!formats.empty()) {
    std::vector<std::pair<int, std::string>> by_count;
    for (const auto& [name, n] : formats) by_count.emplace_back(-n, name);
    std::sort(by_count.begin(), by_count.end());
    info.checkpoint_dtype = "GGUF";
    for (const auto& [n, name] : by_count) info.checkpoint_dtype += " " + name + " x" + std::to_string(-n);
  }
}

AttentionConfig model_attention_config(const ModelInfo& info, int64_t window, const LoadOptions& options) {
  AttentionConfig ac{info.hidden_size, info.num_heads, info.num_kv_heads, info.head_dim, window};
  return ac;
}

bool ties_embeddings(const ModelFiles& files, const Config& c, bool fallback) {
  return !files.has("lm_head.weight") || config_ties_embeddings(files.config(), c, fallback);
}

bool config_ties_embeddings(const Config& root, const Config& c, bool fallback) {
  if (root.has("tie_word_embeddings")) return root.get_bool("tie_word_embeddings");
  return c.get_bool_or("tie_word_embeddings", fallback);
}

Linear load_linear(const ModelFiles& files, const std::string& name, int64_t out, int64_t in, DType store,
                   WeightBytes* owned) {
  const std::string w = name + ".weight";
  const TensorView bias = optional_weight(files, name + ".bias", {out});
  Linear l;
  if (files.is_quantized(w)) {
    // Block-quantized (GGUF): the blocks stay in the mapping and the kernels compute on them directly.
    const StoredTensor t = stored_weight(files, w, {out, in});
    l = Linear::from_quantized(t.data, uint64_t(t.bytes), t.type, out, in, bias, name, store, owned->copied());
  } else {
    l = Linear::from_weights(weight(files, w, {out, in}), bias, name, store, owned->copied());
  }
  owned->add(l);
  return l;
}

Linear load_linear_rows(const ModelFiles& files, const std::string& name, int64_t total_rows, int64_t begin,
                        int64_t rows, int64_t in, DType store, WeightBytes* owned) {
  const StoredTensor t = stored_weight(files, name + ".weight", {total_rows, in});
  TensorView bias = optional_weight(files, name + ".bias", {total_rows});
  if (!bias.empty()) {
    bias.data = static_cast<uint8_t*>(bias.data) + begin * int64_t(dtype_size(bias.dtype));
    bias.shape[0] = rows;
  }
  const int64_t row_bytes = total_rows > 0 ? t.bytes / total_rows : 0;
  Linear l = Linear::from_quantized(t.data + begin * row_bytes, uint64_t(rows * row_bytes), t.type, rows, in, bias,
                                    name, store, owned->copied());
  owned->add(l);
  return l;
}

Linear load_stacked_rows(const ModelFiles& files, const std::string& name, int64_t experts, int64_t rows_per_expert,
                         int64_t in, int64_t expert, int64_t begin, int64_t rows, DType store, WeightBytes* owned) {
  const StoredTensor t = stored_weight(files, name, {experts, rows_per_expert, in});
  const int64_t total = experts * rows_per_expert, row_bytes = total > 0 ? t.bytes / total : 0;
  Linear l = Linear::from_quantized(t.data + (expert * rows_per_expert + begin) * row_bytes, uint64_t(rows * row_bytes),
                                    t.type, rows, in, TensorView{}, name, store, owned->copied());
  owned->add(l);
  return l;
}

std::unique_ptr<Model> finish_decoder(ModelFiles&& files, const Config& c, ModelInfo&& info, Embedding&& embed,
                                      std::vector<DecoderBlock>&& blocks, RmsNorm&& final_norm, bool tie_fallback,
                                      DType store, WeightBytes& owned, DecoderOptions options) {
  info.tied_embeddings = ties_embeddings(files, c, tie_fallback);
  Linear lm_head = load_output_head(files, embed, "model.embed_tokens.weight", info.tied_embeddings, store, &owned);
  owned.record(info);
  return std::make_unique<DecoderModel>(std::move(files), std::move(info), std::move(embed), std::move(blocks),
                                        std::move(final_norm), std::move(lm_head), options);
}

Embedding load_embedding(const ModelFiles& files, const std::string& name, int64_t vocab, int64_t dim) {
  if (!files.is_quantized(name)) return Embedding(weight(files, name, {vocab, dim}), name);
  const StoredTensor t = stored_weight(files, name, {vocab, dim});
  return Embedding::from_quantized(t.data, uint64_t(t.bytes), t.type, vocab, dim, name);
}

DecoderModel::DecoderModel(ModelFiles files, ModelInfo info, Embedding embed, std::vector<DecoderBlock> blocks,
                           RmsNorm norm, Linear lm_head, DecoderOptions options)
    : files_(std::move(files)), info_(std::move(info)), embed_(std::move(embed)), blocks_(std::move(blocks)),
      norm_(std::move(norm)), lm_head_(std::move(lm_head)), options_(options) {
  info_.decode_weight_bytes = lm_head_.weight_bytes();
  for (const auto& b : blocks_)
    info_.decode_weight_bytes += (b.mixer ? b.mixer->weight_bytes() : 0) + (b.ffn ? b.ffn->decode_weight_bytes() : 0);
}

void DecoderModel::run(const Batch& batch, std::span<const int64_t> rows, float* logits) const {
  run_layers(batch, rows, logits, nullptr);
}

std::unique_ptr<DeviceRunner> DecoderModel::make_device_runner(Device device, DType kv_dtype) const {
  return make_decoder_cuda_runner(parts(), device, kv_dtype);
}

std::vector<LayerTrace> DecoderModel::run_trace(const Batch& batch) const {
  std::vector<LayerTrace> trace(blocks_.size());
  const int64_t last = batch.num_tokens() - 1;
  std::vector<float> logits(size_t(info_.vocab_size));
  run_layers(batch, std::span(&last, 1), logits.data(), &trace);
  return trace;
}

void DecoderModel::run_layers(const Batch& batch, std::span<const int64_t> rows, float* logits,
                              std::vector<LayerTrace>* trace) const {
  const int64_t T = batch.num_tokens(), H = info_.hidden_size;
  // The residual stream and its two working rows, per thread and grown once: a decode step allocates nothing.
  thread_local std::vector<float> x, h, y, z;  // z: a parallel block's feed-forward output
  x.resize(size_t(T * H));
  h.resize(size_t(T * H));
  y.resize(size_t(T * H));
  embed_.lookup(batch.tokens.data(), T, x.data(), options_.embedding_scale);
  const float rs = options_.residual_scale;  // Granite's residual_multiplier
  auto add_residual = [&](float alpha, float beta) {
    beta *= rs;
    if (alpha == 1.f && beta == 1.f) {
      for (int64_t i = 0; i < T * H; ++i) x[size_t(i)] += y[size_t(i)];
    } else {
      for (int64_t i = 0; i < T * H; ++i) x[size_t(i)] = alpha * x[size_t(i)] + beta * y[size_t(i)];
    }
  };
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const DecoderBlock& b = blocks_[l];
    const OpLabel block_label("block");  // norms and residuals; the mixer, the FFN and projections name their own
    if (!b.mixer) {  // a feed-forward-only layer: its kind as recorded ("mlp", "moe")
      if (trace) (*trace)[l].kind = l < info_.layers.size() ? info_.layers[l].kind : "mlp";
    } else if (b.input_norm) {
      b.input_norm->forward(x.data(), T, H, h.data(), H);
    } else {
      std::copy(x.begin(), x.end(), h.begin());
    }
    if (b.mixer) {
      if (b.residual_is_normed) std::copy(h.begin(), h.end(), x.begin());
      const LayerMemory memory = layer_memory(int64_t(l));
      {
        const OpLabel label("mixer");
        b.mixer->forward(h.data(), batch, memory, y.data());
      }
      if (trace) b.mixer->trace(h.data(), batch, memory, (*trace)[l]);
      if (b.post_mixer_norm) b.post_mixer_norm->forward(y.data(), T, H, y.data(), H);
      if (b.parallel) {  // the feed-forward of the same normed rows, added beside the mixer's output
        z.resize(size_t(T * H));
        b.ffn->forward(h.data(), T, z.data());
        for (int64_t i = 0; i < T * H; ++i) x[size_t(i)] += y[size_t(i)] + z[size_t(i)];
        continue;
      }
      add_residual(b.mixer_alpha, b.mixer_beta);
    }
    if (!b.ffn) continue;
    if (b.pre_ffn_norm) {
      b.pre_ffn_norm->forward(x.data(), T, H, h.data(), H);
    } else {
      std::copy(x.begin(), x.end(), h.begin());
    }
    if (b.residual_is_normed) std::copy(h.begin(), h.end(), x.begin());
    {
      const OpLabel label("ffn");
      b.ffn->forward(h.data(), T, y.data());
    }
    if (b.post_ffn_norm) b.post_ffn_norm->forward(y.data(), T, H, y.data(), H);
    add_residual(b.ffn_alpha, b.ffn_beta);
  }
  // Only the rows whose logits are wanted go through the final norm and the (large) vocabulary projection.
  const int64_t n_rows = int64_t(rows.size());
  if (n_rows == 0) return;
  for (int64_t i = 0; i < n_rows; ++i)
    std::copy_n(x.begin() + rows[size_t(i)] * H, H, h.begin() + i * H);
  const OpLabel label("output");
  norm_.forward(h.data(), n_rows, H, h.data(), H);
  lm_head_.forward(h.data(), n_rows, logits);
  const int64_t n = n_rows * info_.vocab_size;
  if (options_.logits_scale != 1.f)
    for (int64_t i = 0; i < n; ++i) logits[i] *= options_.logits_scale;
  if (options_.final_logit_softcap > 0.f) {
    const float c = options_.final_logit_softcap;
    for (int64_t i = 0; i < n; ++i) logits[i] = c * std::tanh(logits[i] / c);
  }
}

}  // namespace attnzoo
