#include "convert/gguf_export_dense.h"

#include <vector>

#include "loader/load_error.h"
#include "models/hf_config.h"

namespace attnzoo {
namespace {

// Which layers slide: layer_types, or the pattern transformers fills in without it (a full layer every `period`).
std::vector<bool> sliding_layers(const Config& c, int64_t layers, int64_t period) {
  std::vector<bool> out(size_t(layers), false);
  if (c.has("layer_types")) {
    const std::vector<std::string> types = c.get_string_list("layer_types");
    if (int64_t(types.size()) != layers)
      throw LoadError(c.source() + ": key 'layer_types': expected " + std::to_string(layers) + " entries");
    for (size_t i = 0; i < types.size(); ++i) out[i] = types[i] == "sliding_attention";
    return out;
  }
  for (int64_t i = 0; i < layers; ++i) out[size_t(i)] = (i + 1) % period != 0;
  return out;
}

void add_mistral(const Config& c) {
  // A window at least as long as the context changes nothing; a shorter one would be lost.
  if (c.has("sliding_window") && c.get_int("sliding_window") < c.get_int_or("max_position_embeddings", 0))
    throw LoadError(c.source() + ": key 'sliding_window': GGUF (llama.cpp's llama, as the converter writes Mistral) "
                    "holds no sliding window; only null or a window covering max_position_embeddings is written");
}

void add_qwen3moe(GgufWriter& w, const Config& c) {
  const bool every_layer = c.get_int_or("decoder_sparse_step", 1) == 1 &&
                           (!c.has("mlp_only_layers") || c.get_int_list("mlp_only_layers").empty());
  if (!every_layer)
    throw LoadError(c.source() + ": keys 'decoder_sparse_step' / 'mlp_only_layers': GGUF (llama.cpp's qwen3moe) "
                    "holds experts in every layer");
  if (!c.get_bool_or("norm_topk_prob", false))  // transformers' default
    throw LoadError(c.source() + ": key 'norm_topk_prob': llama.cpp's qwen3moe always renormalizes the top-k weights");
  if (c.get_bool_or("use_sliding_window", false))
    throw LoadError(c.source() + ": key 'use_sliding_window': GGUF (llama.cpp's qwen3moe) holds no sliding window");
  // released configs say num_experts, transformers 5 writes num_local_experts
  const int64_t experts = c.has("num_experts") ? c.get_int("num_experts") : c.get_int("num_local_experts");
  w.add_u32("qwen3moe.expert_count", uint32_t(experts));
  w.add_u32("qwen3moe.expert_used_count", uint32_t(c.get_int("num_experts_per_tok")));
  w.add_u32("qwen3moe.expert_feed_forward_length", uint32_t(c.get_int("moe_intermediate_size")));
}

// The sliding layers' RoPE of a Gemma 3 config (rope_parameters.sliding_attention, or rope_local_base_freq).
void check_gemma3_local_rope(const Config& c) {
  const bool nested = c.has("rope_parameters") && c.sub("rope_parameters").has("sliding_attention");
  const Config p = nested ? c.sub("rope_parameters").sub("sliding_attention") : c;
  const char* key = nested ? "rope_parameters.sliding_attention" : "rope_local_base_freq";
  const double theta = p.get_float_or(nested ? "rope_theta" : "rope_local_base_freq", 10000.0);
  if (theta != 10000.0 || p.get_string_or("rope_type", "default") != "default")
    throw LoadError(c.source() + ": key '" + key + "': llama.cpp's gemma3 fixes the sliding layers' RoPE at base "
                    "10000, unscaled");
}

void add_gemma(GgufWriter& w, const Config& c, const std::string& arch) {
  const bool gemma3 = arch == "gemma3";
  const std::string p = arch + ".";
  const int64_t layers = c.get_int("num_hidden_layers"), heads = c.get_int("num_attention_heads");
  if (!c.has("head_dim")) throw LoadError(c.source() + ": key 'head_dim' is missing (Gemma's default is 256)");
  // llama.cpp's attention scale: 1/sqrt(hidden / heads) for the 27B models (46 / 62 layers), else 1/sqrt(head_dim)
  const bool big = layers == (gemma3 ? 62 : 46);
  const int64_t scalar = big ? c.get_int("hidden_size") / heads : c.get_int("head_dim");
  if (c.get_float_or("query_pre_attn_scalar", 256.0) != double(scalar))
    throw LoadError(c.source() + ": key 'query_pre_attn_scalar': GGUF (llama.cpp's " + arch + ") holds only " +
                    std::to_string(scalar) + " for this model");
  const std::string act = c.get_string_or("hidden_activation", c.get_string_or("hidden_act", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    throw LoadError(c.source() + ": key 'hidden_activation': llama.cpp's " + arch + " runs gelu_pytorch_tanh only");
  // llama.cpp's layer pattern: gemma2 slides every other layer from the first, gemma3 all but every 6th.
  const int64_t period = gemma3 ? 6 : 2;
  const std::vector<bool> sliding = sliding_layers(c, layers, gemma3 ? c.get_int_or("sliding_window_pattern", 6) : 2);
  for (int64_t i = 0; i < layers; ++i)
    if (sliding[size_t(i)] != ((i + 1) % period != 0))
      throw LoadError(c.source() + ": key 'layer_types': GGUF (llama.cpp's " + arch + ") holds only a full-attention "
                      "layer every " + std::to_string(period) + (period == 2 ? "nd" : "th") + " layer");
  w.add_u32(p + "attention.sliding_window", uint32_t(c.get_int_or("sliding_window", 4096)));
  // Gemma 3 runs without the attention cap its config may name (models/gemma.cc), as llama.cpp's gemma3 does.
  if (!gemma3 && c.has("attn_logit_softcapping")) w.add_f32(p + "attn_logit_softcapping", float(c.get_float("attn_logit_softcapping")));
  if (c.has("final_logit_softcapping"))
    w.add_f32(p + "final_logit_softcapping", float(c.get_float("final_logit_softcapping")));
  if (gemma3) check_gemma3_local_rope(c);
}

}  // namespace

RopeConfig export_rope(const Config& c, const std::string& arch, int64_t head_dim) {
  if (arch != "gemma3") return read_rope(c, head_dim, rotary_share(c.get_string_or("model_type", "")));
  const bool nested = c.has("rope_parameters") && c.sub("rope_parameters").has("full_attention");
  const Config p = nested ? c.sub("rope_parameters").sub("full_attention") : c;
  RopeConfig r = read_rope(p, head_dim, kWholeHead);
  if (!p.has("rope_theta")) r.theta = 1000000.0;  // transformers' global default
  if (r.type != "default" && r.type != "linear")
    throw LoadError(c.source() + ": rope type '" + r.type + "': GGUF (llama.cpp's gemma3) holds linear scaling only");
  return r;
}

std::string wrapper_text_class(const Config& root, const std::string& hf_class) {
  if (hf_class == "Gemma3ForConditionalGeneration") return "Gemma3ForCausalLM";
  if (hf_class != "LlavaForConditionalGeneration" || !root.has_text_config()) return hf_class;
  const std::string type = root.text_config().get_string_or("model_type", "llama");
  if (type == "mistral") return "MistralForCausalLM";
  if (type == "llama" || type == "qwen2") return "LlamaForCausalLM";
  throw LoadError(root.source() + ": key 'text_config.model_type': '" + type + "': llama.cpp's converter writes a "
                  "LLaVA's language model as llama, which cannot hold a " + type + " model");
}

void add_dense_family_hparams(GgufWriter& w, const Config& c, const std::string& hf_class, const std::string& arch) {
  if (hf_class == "MistralForCausalLM") add_mistral(c);
  if (arch == "qwen3moe") add_qwen3moe(w, c);
  if (arch == "gemma2" || arch == "gemma3") add_gemma(w, c, arch);
}

}  // namespace attnzoo
