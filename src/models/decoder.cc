#include "models/decoder.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "loader/load_error.h"

namespace attnzoo {

TensorView weight(const ModelFiles& files, const std::string& name, std::initializer_list<int64_t> shape) {
  const TensorView t = files.tensor(name);
  bool ok = t.ndim == int(shape.size());
  int d = 0;
  for (int64_t s : shape) ok = ok && t.shape[size_t(d++)] == s;
  if (!ok) {
    std::string want = "[";
    for (int64_t s : shape) want += (want.size() > 1 ? ", " : "") + std::to_string(s);
    throw LoadError(files.source(name) + ": tensor '" + name + "' has shape " + t.shape_str() +
                    ", expected " + want + "]");
  }
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
                          const std::string& default_model_type, bool with_intermediate) {
  ModelInfo info;
  info.architecture = root.get_string_list("architectures")[0];
  info.model_type = c.get_string_or("model_type", default_model_type);
  info.hidden_size = c.get_int("hidden_size");
  if (with_intermediate) info.intermediate_size = c.get_int("intermediate_size");
  info.num_layers = c.get_int("num_hidden_layers");
  info.num_heads = c.get_int("num_attention_heads");
  info.num_kv_heads = c.get_int_or("num_key_value_heads", info.num_heads);
  info.head_dim = c.get_int_or("head_dim", info.hidden_size / std::max<int64_t>(1, info.num_heads));
  info.vocab_size = c.get_int("vocab_size");
  info.max_position_embeddings = c.get_int_or("max_position_embeddings", 0);
  info.checkpoint_dtype = c.dtype();
  info.weights = options.weights;
  return info;
}

void count_checkpoint(const ModelFiles& files, ModelInfo& info) {
  for (const auto& t : files.names()) {
    info.parameter_count += files.numel(t);
    info.checkpoint_bytes += files.nbytes(t);
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
                   uint64_t* owned) {
  Linear l = Linear::from_weights(weight(files, name + ".weight", {out, in}),
                                  optional_weight(files, name + ".bias", {out}), name, store);
  if (l.owns_weight()) *owned += l.weight_bytes();
  return l;
}

DecoderModel::DecoderModel(ModelFiles files, ModelInfo info, Embedding embed, std::vector<DecoderBlock> blocks,
                           RmsNorm norm, Linear lm_head, DecoderOptions options)
    : files_(std::move(files)), info_(std::move(info)), embed_(std::move(embed)), blocks_(std::move(blocks)),
      norm_(std::move(norm)), lm_head_(std::move(lm_head)), options_(options) {
  info_.decode_weight_bytes = lm_head_.weight_bytes();
  for (const auto& b : blocks_)
    info_.decode_weight_bytes += b.mixer->weight_bytes() + (b.ffn ? b.ffn->decode_weight_bytes() : 0);
}

void DecoderModel::run(const Batch& batch, std::span<const int64_t> rows, float* logits) const {
  run_layers(batch, rows, logits, nullptr);
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
  std::vector<float> x(size_t(T * H)), h(size_t(T * H)), y(size_t(T * H));
  embed_.lookup(batch.tokens.data(), T, x.data(), options_.embedding_scale);
  auto add_residual = [&] {
    for (int64_t i = 0; i < T * H; ++i) x[size_t(i)] += y[size_t(i)];
  };
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const DecoderBlock& b = blocks_[l];
    b.input_norm.forward(x.data(), T, H, h.data(), H);
    const LayerMemory memory = layer_memory(int64_t(l));
    b.mixer->forward(h.data(), batch, memory, y.data());
    if (trace) b.mixer->trace(h.data(), batch, memory, (*trace)[l]);
    if (b.post_mixer_norm) b.post_mixer_norm->forward(y.data(), T, H, y.data(), H);
    add_residual();
    if (!b.ffn) continue;
    if (b.pre_ffn_norm) {
      b.pre_ffn_norm->forward(x.data(), T, H, h.data(), H);
    } else {
      std::copy(x.begin(), x.end(), h.begin());
    }
    b.ffn->forward(h.data(), T, y.data());
    if (b.post_ffn_norm) b.post_ffn_norm->forward(y.data(), T, H, y.data(), H);
    add_residual();
  }
  // Only the rows whose logits are wanted go through the final norm and the (large) vocabulary projection.
  const int64_t n_rows = int64_t(rows.size());
  if (n_rows == 0) return;
  for (int64_t i = 0; i < n_rows; ++i)
    std::copy_n(x.begin() + rows[size_t(i)] * H, H, h.begin() + i * H);
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
