// Phi3ForCausalLM (Phi-3, Phi-3.5-mini, Phi-4, Phi-4-mini), as transformers runs it: Llama's block and layout with
// two fused projections, split here into views of their rows (no copy):
//   self_attn.qkv_proj [q (heads * D) ; k (kv_heads * D) ; v (kv_heads * D)]   mlp.gate_up_proj [gate (I) ; up (I)]
// RoPE may be partial (partial_rotary_factor) and LongRoPE-scaled (rope type longrope / su: per-frequency short and
// long factors, see read_longrope in hf_config.cc for which set is used); sliding_window, when set, windows every
// layer (Phi-3-mini-4k).
#include "layers/activations.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/llama_layout.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

AttentionConfig attention_config(const ModelInfo& info, const Config& c, int64_t i, const LoadOptions& options) {
  return model_attention_config(info, layer_window(c, i, info.num_layers), options);
}

}  // namespace

std::unique_ptr<Model> build_phi3(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  ModelInfo info = read_dense_model_info(files.config(), c, options, "phi3");
  const Activation act = parse_activation(c.get_string_or("hidden_act", "silu"));
  const int64_t H = info.hidden_size, I = info.intermediate_size, D = info.head_dim;
  const int64_t qw = info.num_heads * D, kw = info.num_kv_heads * D;
  const Rope rope(read_rope(c, D, rotary_share("phi3")));
  count_checkpoint(files, info);

  WeightBytes owned;
  auto rows = [&](const std::string& name, int64_t total, int64_t begin, int64_t n) {
    return load_linear_rows(files, name, total, begin, n, H, options.weights, &owned);
  };
  LlamaLayoutParts parts;
  parts.norm_eps = float(c.get_float_or("rms_norm_eps", 1e-5));
  parts.mixer = [&](int64_t i, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    const std::string a = p + ".self_attn", qkv = a + ".qkv_proj";
    const int64_t total = qw + 2 * kw;
    return std::make_unique<AttentionLayer>(
        attention_config(info, c, i, options), rows(qkv, total, 0, qw), rows(qkv, total, qw, kw),
        rows(qkv, total, qw + kw, kw), load_linear(files, a + ".o_proj", H, qw, options.weights, &owned), std::nullopt,
        std::nullopt, rope, a);
  };
  parts.ffn = [&](int64_t, const std::string& p) -> std::unique_ptr<FeedForward> {
    const std::string m = p + ".mlp", gate_up = m + ".gate_up_proj";
    return std::make_unique<GatedMlp>(rows(gate_up, 2 * I, 0, I), rows(gate_up, 2 * I, I, I),
                                      load_linear(files, m + ".down_proj", H, I, options.weights, &owned), act, m);
  };
  return assemble_llama_layout(std::move(files), c, std::move(info), parts, options.weights, owned);
}

ModelDescription describe_phi3(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  ModelDescription d;
  d.info = read_dense_model_info(root, c, options, "phi3");
  (void)read_rope(c, d.info.head_dim, rotary_share("phi3"));  // a bad rope config fails here as in the builder
  const int64_t H = d.info.hidden_size, I = d.info.intermediate_size, V = d.info.vocab_size;
  const int64_t qw = d.info.num_heads * d.info.head_dim, kw = d.info.num_kv_heads * d.info.head_dim;
  d.attention = attention_config(d.info, c, 0, options);
  d.info.tied_embeddings = config_ties_embeddings(root, c, false);
  Checked params = Checked(V) * H * (d.info.tied_embeddings ? 1 : 2) + H;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    const AttentionConfig ac = attention_config(d.info, c, i, options);
    d.info.layers.push_back({AttentionLayer::kind_of(ac), ac.window, AttentionLayer::spec(ac)});
    params += Checked(2) * H + linear_params(qw + 2 * kw, H) + linear_params(H, qw) + Checked(3) * I * H;
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
