#pragma once
// The pre-norm decoder stack every architecture builds (Llama-like, Gemma, hybrids):
//   x = embed(tokens) * embedding_scale
//   per block: x += post_mixer_norm?(mixer(input_norm?(x))); x += post_ffn_norm?(ffn(pre_ffn_norm?(x)))
//              (parallel blocks: x += mixer(h) + ffn(h), h = input_norm(x))
//              (MiniMax: h = norm(x); x = alpha * h + beta * sublayer(h), for the mixer and the feed-forward each)
//              each sublayer's output times residual_scale before the add (Granite)
//   logits = softcap?(lm_head(norm(x)) * logits_scale)
// Builders fill the parts; this class runs them and owns the checkpoint mapping the weights borrow from.
#include <memory>
#include <optional>
#include <vector>

#include "layers/attention_layer.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/mlp.h"
#include "layers/norm.h"
#include "loader/model_dir.h"
#include "models/model.h"
#include "models/weight_bytes.h"

namespace attnzoo {

struct DecoderBlock {
  std::optional<RmsNorm> input_norm;      // absent in OLMo 2, which norms only the sublayers' outputs
  std::unique_ptr<SequenceMixer> mixer;    // null: a feed-forward-only block (Nemotron-H's MLP layers)
  std::optional<RmsNorm> post_mixer_norm;  // Gemma 2/3: the mixer's output is normed before the residual add
  std::optional<RmsNorm> pre_ffn_norm;     // Llama's post_attention_layernorm; absent with no feed-forward
  std::unique_ptr<FeedForward> ffn;        // null: the block has no feed-forward (Mamba-2)
  std::optional<RmsNorm> post_ffn_norm;    // Gemma 2/3
  // Cohere: the feed-forward reads the same normed input as the mixer, x += mixer(h) + ffn(h), h = input_norm(x)
  bool parallel = false;
  // MiniMax-Text-01 / M1 ("postnorm"): the residual each sublayer adds to is its normed input, scaled:
  // h = norm(x); x = alpha * h + beta * sublayer(h) (DeepNorm's alpha, e.g. (2 * layers)^(1/4)).
  bool residual_is_normed = false;
  float mixer_alpha = 1.f, mixer_beta = 1.f, ffn_alpha = 1.f, ffn_beta = 1.f;
};

struct DecoderOptions {
  float embedding_scale = 1.f;     // Gemma: sqrt(hidden)
  float logits_scale = 1.f;        // muP-style output multipliers
  float final_logit_softcap = 0.f;  // Gemma 2: logits = c * tanh(logits / c)
  float residual_scale = 1.f;      // Granite's residual_multiplier
};

// A DecoderModel's parts, read-only: what a runner that computes elsewhere copies (models/cuda/).
struct DecoderParts {
  const ModelInfo* info = nullptr;
  const Embedding* embed = nullptr;
  const std::vector<DecoderBlock>* blocks = nullptr;
  const RmsNorm* norm = nullptr;
  const Linear* lm_head = nullptr;
  const DecoderOptions* options = nullptr;
};

class DecoderModel : public Model {
 public:
  DecoderModel(ModelFiles files, ModelInfo info, Embedding embed, std::vector<DecoderBlock> blocks, RmsNorm norm,
               Linear lm_head, DecoderOptions options = {});

  const ModelInfo& info() const override { return info_; }
  const Config& config() const override { return files_.config(); }
  DecoderParts parts() const { return {&info_, &embed_, &blocks_, &norm_, &lm_head_, &options_}; }

 protected:
  void run(const Batch& batch, std::span<const int64_t> rows, float* logits) const override;
  std::vector<LayerTrace> run_trace(const Batch& batch) const override;
  // The Llama family's blocks on a GPU (models/cuda/decoder_cuda_runner.h); other block shapes refused by name.
  std::unique_ptr<DeviceRunner> make_device_runner(Device device, DType kv_dtype) const override;

 private:
  // The forward pass; with `trace`, each mixer also records its LayerTrace (one per block).
  void run_layers(const Batch& batch, std::span<const int64_t> rows, float* logits, std::vector<LayerTrace>* trace) const;
  ModelFiles files_;  // keeps the mapping alive: weights below are views into it
  ModelInfo info_;
  Embedding embed_;
  std::vector<DecoderBlock> blocks_;
  RmsNorm norm_;
  Linear lm_head_;
  DecoderOptions options_;
};

// The shape fields most decoder configs share, read under transformers' key names (missing required keys ->
// LoadError naming them); `with_intermediate`: the config has a dense MLP width (intermediate_size).
ModelInfo read_model_info(const ModelFiles& files, const Config& c, const LoadOptions& options,
                          const std::string& default_model_type, bool with_intermediate);
// The same from config.json alone (`root`: the file's top level, holding "architectures"; `c`: its text config).
// `num_layers`: the layer count when the config's num_hidden_layers does not decide it (Nemotron-H's pattern does,
// and its configs may lack the key).
ModelInfo read_model_info(const Config& root, const Config& c, const LoadOptions& options,
                          const std::string& default_model_type, bool with_intermediate,
                          std::optional<int64_t> num_layers = std::nullopt);
// read_model_info with a dense MLP width, every size checked to be positive (LoadError naming them otherwise): the
// shape fields of the Llama-like families (Llama, OLMo 2, Phi-3, Cohere) and of the hybrids.
ModelInfo read_dense_model_info(const Config& root, const Config& c, const LoadOptions& options,
                                const std::string& default_model_type,
                                std::optional<int64_t> num_layers = std::nullopt);
// Adds the checkpoint's parameter count and bytes (as stored: a quantized tensor's blocks) to info (what `inspect`
// reports); for a GGUF, checkpoint_dtype lists its storage formats ("GGUF Q4_1 x210 F32 x61 Q8_0 x1").
void count_checkpoint(const ModelFiles& files, ModelInfo& info);
// A Linear from `name`.weight [out, in] and an optional `name`.bias, held as `store`; bytes it had to convert (not
// borrow from the mapping) are added to *owned. A block-quantized weight (GGUF) is borrowed as its blocks.
Linear load_linear(const ModelFiles& files, const std::string& name, int64_t out, int64_t in, DType store,
                   WeightBytes* owned);

// Softmax attention with the model's head shape, `window` (0: full causal) and the load's KV block size; builders
// add their own scale / softcap / output gate on top.
AttentionConfig model_attention_config(const ModelInfo& info, int64_t window, const LoadOptions& options);

// The end of a builder with model.embed_tokens / model.norm / lm_head names: the output head (tied to `embed` when
// the checkpoint has no lm_head.weight or ties_embeddings says so, with `tie_fallback`), info.tied_embeddings and
// info.owned_weight_bytes set, and the DecoderModel over everything.
std::unique_ptr<Model> finish_decoder(ModelFiles&& files, const Config& c, ModelInfo&& info, Embedding&& embed,
                                      std::vector<DecoderBlock>&& blocks, RmsNorm&& final_norm, bool tie_fallback,
                                      DType store, WeightBytes& owned, DecoderOptions options = {});

// Whether the output head reuses the embedding: always when the checkpoint has no lm_head.weight; otherwise by
// "tie_word_embeddings" of the top-level config (a multimodal wrapper's flag is the one transformers obeys, not
// its text_config's), else of the text config `c`, else `fallback`.
bool ties_embeddings(const ModelFiles& files, const Config& c, bool fallback);
// The config's side of that rule (what a config-only description can know): the top-level flag, else c's, else
// fallback.
bool config_ties_embeddings(const Config& root, const Config& c, bool fallback);

// Rows [begin, begin + rows) of the fused projection `name`.weight [total_rows, in] (and of its bias) as one Linear:
// Phi-3's qkv_proj and gate_up_proj, split without a copy (rows are contiguous, whole blocks when quantized).
Linear load_linear_rows(const ModelFiles& files, const std::string& name, int64_t total_rows, int64_t begin,
                        int64_t rows, int64_t in, DType store, WeightBytes* owned);

// Rows [begin, begin + rows) of expert `expert` in the stacked projection `name` [experts, rows_per_expert, in] (no
// bias), as one Linear without a copy: Granite's block_sparse_moe.input_linear / output_linear.
Linear load_stacked_rows(const ModelFiles& files, const std::string& name, int64_t experts, int64_t rows_per_expert,
                         int64_t in, int64_t expert, int64_t begin, int64_t rows, DType store, WeightBytes* owned);

// The token embedding table `name` [vocab, dim], dense or block-quantized, borrowed from the mapping.
Embedding load_embedding(const ModelFiles& files, const std::string& name, int64_t vocab, int64_t dim);

// Fetches a float tensor (f32, bf16 or f16) and checks its shape; LoadError names the tensor and the file holding
// it.
TensorView weight(const ModelFiles& files, const std::string& name, std::initializer_list<int64_t> shape);
// As weight(), for a U8 tensor of codes (gpt-oss's MXFP4 blocks and exponents); `holds` says what, in the error.
TensorView byte_weight(const ModelFiles& files, const std::string& name, std::initializer_list<int64_t> shape,
                       const char* holds);
// Any tensor as stored (quantized or not), shape checked the same way.
StoredTensor stored_weight(const ModelFiles& files, const std::string& name, std::initializer_list<int64_t> shape);
// As weight(), but an empty view when the checkpoint has no such tensor.
TensorView optional_weight(const ModelFiles& files, const std::string& name, std::initializer_list<int64_t> shape);

}  // namespace attnzoo
