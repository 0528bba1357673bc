#include "loader/gguf_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>

#include "core/dtype.h"
#include "loader/gguf_deepseek2.h"
#include "loader/gguf_hf_util.h"
#include "loader/gguf_gpt_oss.h"
#include "loader/gguf_hybrids.h"
#include "loader/gguf_phi3.h"
#include "loader/gguf_qwen35.h"
#include "loader/gguf_sigmoid_moe.h"
#include "loader/json.h"
#include "loader/json_writer.h"

namespace attnzoo {
namespace {

using gguf_hf::JsonObject;
using gguf_hf::split_block;

struct Arch {
  const char* gguf;        // general.architecture
  const char* model_type;  // config.json model_type
  const char* hf_class;    // config.json architectures[0]
  bool permuted_qk;        // llama's converter interleaves Q/K rows for ggml's RoPE
  bool norm_plus_one;      // gemma's converter folds Gemma's 1 + w into norm weights
  // gemma2/3 (four norms per layer, ffn_norm the pre-feedforward one) and olmo2 (only the two after the
  // sublayers): post_attention_norm is a norm of the attention's output, not Llama's pre-feedforward norm
  bool sandwich_norms;
  bool moe;
};

constexpr Arch kArchs[] = {
    {"llama", "llama", "LlamaForCausalLM", true, false, false, false},
    {"qwen2", "qwen2", "Qwen2ForCausalLM", false, false, false, false},
    {"qwen3", "qwen3", "Qwen3ForCausalLM", false, false, false, false},
    {"qwen3moe", "qwen3_moe", "Qwen3MoeForCausalLM", false, false, false, true},
    {"gemma", "gemma", "GemmaForCausalLM", false, true, false, false},
    {"gemma2", "gemma2", "Gemma2ForCausalLM", false, true, true, false},
    {"gemma3", "gemma3_text", "Gemma3ForCausalLM", false, true, true, false},
    {"olmo2", "olmo2", "Olmo2ForCausalLM", false, false, true, false},
    {"phi3", "phi3", "Phi3ForCausalLM", false, false, false, false},
    // llama.cpp fixes SmolLM3's NoPE layers at every 4th, the default of transformers' SmolLM3Config
    {"smollm3", "smollm3", "SmolLM3ForCausalLM", true, false, false, false},
    // Cohere's interleaved RoPE is ggml's plain one: no permutation; cohere2 slides all but every 4th layer
    {"command-r", "cohere", "CohereForCausalLM", false, false, false, false},
    {"cohere2", "cohere2", "Cohere2ForCausalLM", false, false, false, false},
    // GLM-4's interleaved RoPE is ggml's plain one too
    {"glm4", "glm4", "Glm4ForCausalLM", false, false, false, false},
    // post_attention_norm is gpt-oss's pre-feedforward norm (sandwich_norms maps it so); experts: gguf_gpt_oss.h
    {"gpt-oss", "gpt_oss", "GptOssForCausalLM", false, false, true, false},
    // sigmoid-routed MoEs with a routing bias (gguf_sigmoid_moe.h); their experts are sliced by expert_count
    {"glm4moe", "glm4_moe", "Glm4MoeForCausalLM", false, false, false, false},
    {"minimax-m2", "minimax_m2", "MiniMaxM2ForCausalLM", false, false, false, false},
    // Mistral 3's text models (the converter's LlamaModel under another name): Ministral 3 when the file holds
    // Llama 4's attention.temperature_scale, else Mistral Small 3.x's plain Mistral
    {"mistral3", "ministral3", "Ministral3ForCausalLM", true, false, false, false},
    // DeepSeek-V2 / V3 (the class follows expert_gating_func: gguf_deepseek2.h); RoPE on interleaved pairs
    {"deepseek2", "deepseek_v3", "DeepseekV3ForCausalLM", false, false, false, true},
};

const Arch& find_arch(const GgufFile& f) {
  const std::string& name = f.get_string("general.architecture");
  for (const Arch& a : kArchs)
    if (name == a.gguf) return a;
  std::string known;
  for (const Arch& a : kArchs) known += (known.empty() ? "" : ", ") + std::string(a.gguf);
  for (const std::string& h : gguf_hybrid_architectures()) known += ", " + h;
  throw LoadError(f.path() + ": key 'general.architecture': '" + name + "' is not supported as a model source (supported: " +
                  known + ")");
}

// GGUF block tensor base names and their Hugging Face suffixes (after "model.layers.N."), both directions.
constexpr std::pair<const char*, const char*> kBlockNames[] = {
    {"attn_norm", "input_layernorm"},     {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},       {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},  {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},  {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},            {"ffn_down", "mlp.down_proj"},
    {"ffn_gate_inp", "mlp.gate"},         {"post_ffw_norm", "post_feedforward_layernorm"},
};

// Names one architecture maps its own way (the converter's tensor map): Phi-3's and GLM-4's fused projections keep
// their rows, GLM-4's norms after the sublayers have their own names.
struct ArchName {
  const char* arch;
  const char* gguf;
  const char* hf;
};
constexpr ArchName kArchNames[] = {
    {"phi3", "attn_qkv", "self_attn.qkv_proj"},
    {"phi3", "ffn_up", "mlp.gate_up_proj"},
    {"glm4", "ffn_up", "mlp.gate_up_proj"},
    {"glm4", "post_attention_norm", "post_self_attn_layernorm"},
    {"glm4", "post_ffw_norm", "post_mlp_layernorm"},
    {"gpt-oss", "ffn_gate_inp", "mlp.router"},
    {"glm4moe", "post_attention_norm", "post_attention_layernorm"},
    {"glm4moe", "ffn_gate_shexp", "mlp.shared_experts.gate_proj"},
    {"glm4moe", "ffn_up_shexp", "mlp.shared_experts.up_proj"},
    {"glm4moe", "ffn_down_shexp", "mlp.shared_experts.down_proj"},
    {"glm4moe", "exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},
    {"glm4moe", "nextn.eh_proj", "eh_proj"},
    {"glm4moe", "nextn.enorm", "enorm"},
    {"glm4moe", "nextn.hnorm", "hnorm"},
    {"glm4moe", "nextn.embed_tokens", "embed_tokens"},
    {"glm4moe", "nextn.shared_head_head", "shared_head.head"},
    {"glm4moe", "nextn.shared_head_norm", "shared_head.norm"},
    {"minimax-m2", "ffn_gate_inp", "block_sparse_moe.gate"},
    {"minimax-m2", "exp_probs_b.bias", "block_sparse_moe.e_score_correction_bias"},
    {"deepseek2", "attn_q_a", "self_attn.q_a_proj"},
    {"deepseek2", "attn_q_b", "self_attn.q_b_proj"},
    {"deepseek2", "attn_q_a_norm", "self_attn.q_a_layernorm"},
    {"deepseek2", "attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"},
    {"deepseek2", "attn_kv_a_norm", "self_attn.kv_a_layernorm"},
    {"deepseek2", "attn_kv_b", "self_attn.kv_b_proj"},
    {"deepseek2", "ffn_gate_shexp", "mlp.shared_experts.gate_proj"},
    {"deepseek2", "ffn_up_shexp", "mlp.shared_experts.up_proj"},
    {"deepseek2", "ffn_down_shexp", "mlp.shared_experts.down_proj"},
    {"deepseek2", "exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},  // whole names: the bias is a buffer
};


bool is_phi3(const Arch& a) { return std::string(a.gguf) == "phi3"; }

// Norms whose name depends on the layout: ffn_norm is the pre-feedforward norm of sandwich-norm models.
std::optional<std::string> norm_suffix(const Arch& a, const std::string& base) {
  if (base == "ffn_norm") return std::string(a.sandwich_norms ? "pre_feedforward_layernorm" : "post_attention_layernorm");
  if (base == "post_attention_norm" && a.sandwich_norms) return std::string("post_attention_layernorm");
  return std::nullopt;
}

// A block tensor's Hugging Face suffix (after "model.layers.N."), or nullopt when unknown.
std::optional<std::string> block_suffix(const Arch& a, const std::string& base, const std::string& ext) {
  for (const ArchName& n : kArchNames) {
    if (a.gguf != std::string_view(n.arch)) continue;
    if (base == n.gguf) return n.hf + ext;
    if (base + ext == n.gguf) return std::string(n.hf);
  }
  if (auto n = norm_suffix(a, base)) return *n + ext;
  for (const auto& [g, h] : kBlockNames)
    if (base == g) return h + ext;
  return std::nullopt;
}

// Llama 3.1-style RoPE scaling reaches GGUF only as rope_freqs.weight, the converter's per-frequency divisors of
// theta. transformers' config needs rope_scaling {llama3, factor, low / high_freq_factor, original context}: the
// factor is the largest divisor, the rest are the values every Llama 3.x release uses, and the stored divisors are
// recomputed from them with the converter's rule, so a file made with other values is refused, not misread.
std::string llama3_rope_scaling(const GgufFile& f, const GgufTensor& t, double theta, int64_t rope_dim) {
  auto fail = [&](const std::string& m) -> std::string { throw LoadError(f.path() + ": tensor 'rope_freqs.weight': " + m); };
  if (t.type != QuantType::F32 || t.ne.size() != 1 || rope_dim <= 0 || t.ne[0] != rope_dim / 2)
    return fail("expected " + std::to_string(rope_dim / 2) + " F32 values (one per rotary frequency)");
  std::vector<float> stored(size_t(t.ne[0]));
  std::memcpy(stored.data(), t.data, stored.size() * sizeof(float));
  double factor = 1.0;
  for (float v : stored) {
    if (!std::isfinite(v) || v < 1.0f) return fail("RoPE factors must be finite and >= 1");
    factor = std::max(factor, double(v));
  }
  constexpr double kLow = 1.0, kHigh = 4.0, kOriginal = 8192.0, kPi = 3.14159265358979323846;
  for (size_t i = 0; i < stored.size(); ++i) {
    const double freq = 1.0 / std::pow(theta, double(2 * i) / double(rope_dim));
    const double wavelen = 2 * kPi / freq;
    double want = factor;
    if (wavelen < kOriginal / kHigh) {
      want = 1.0;
    } else if (wavelen <= kOriginal / kLow) {
      const double smooth = (kOriginal / wavelen - kLow) / (kHigh - kLow);
      want = 1.0 / ((1 - smooth) / factor + smooth);
    }
    if (std::abs(double(stored[i]) - want) > 1e-4 * want) {
      return fail("factor " + std::to_string(stored[i]) + " at frequency " + std::to_string(i) +
                  " does not follow Llama 3's rule (factor " + std::to_string(factor) +
                  ", low_freq_factor 1, high_freq_factor 4, original context 8192)");
    }
  }
  JsonObject r;
  r.add_string("rope_type", "llama3");
  r.add_float("factor", factor);
  r.add_float("low_freq_factor", kLow);
  r.add_float("high_freq_factor", kHigh);
  r.add_int("original_max_position_embeddings", int64_t(kOriginal));
  return r.str();
}

}  // namespace

std::string gguf_hf_config_json(const GgufFile& f) {
  if (gguf_is_hybrid(f)) return gguf_hybrid_config_json(f);
  const Arch& a = find_arch(f);
  if (std::string(a.gguf) == "deepseek2") return deepseek2_config_json(f);
  const std::string p = std::string(a.gguf) + ".";
  auto has = [&](const std::string& k) { return f.has(p + k); };
  auto get_int = [&](const std::string& k) { return f.get_int(p + k); };
  auto get_float = [&](const std::string& k) { return f.get_float(p + k); };

  // llama.cpp stores Mixtral as llama with stacked experts
  const bool mixtral = std::string(a.gguf) == "llama" && has("expert_count");
  const bool mistral = std::string(a.gguf) == "mistral3" && !has("attention.temperature_scale");
  JsonObject c;
  const char* hf_class = mixtral ? "MixtralForCausalLM" : mistral ? "MistralForCausalLM" : a.hf_class;
  c.add("architectures", "[" + json::quote(hf_class) + "]");
  c.add_string("model_type", mixtral ? "mixtral" : mistral ? "mistral" : a.model_type);
  const gguf_hf::Meta m{f, p};
  const int64_t hidden = get_int("embedding_length");
  const int64_t heads = m.count("attention.head_count", "num_attention_heads");
  const int64_t layers = m.layers() - gguf_mtp_blocks(f, a.gguf);  // glm4moe's MTP blocks are no decoder layers
  c.add_int("hidden_size", hidden);
  c.add_int("num_hidden_layers", layers);
  c.add_int("num_attention_heads", heads);
  c.add_int("num_key_value_heads", has("attention.head_count_kv") ? get_int("attention.head_count_kv") : heads);
  const int64_t head_dim = has("attention.key_length") ? get_int("attention.key_length") : hidden / heads;
  c.add_int("head_dim", head_dim);
  if (has("feed_forward_length")) c.add_int("intermediate_size", get_int("feed_forward_length"));
  c.add_float("rms_norm_eps", has("attention.layer_norm_rms_epsilon") ? get_float("attention.layer_norm_rms_epsilon") : 1e-6);
  c.add_float("rope_theta", has("rope.freq_base") ? get_float("rope.freq_base") : 10000.0);
  if (has("context_length")) c.add_int("max_position_embeddings", get_int("context_length"));

  const std::string scaling = has("rope.scaling.type") ? f.get_string(p + "rope.scaling.type") : "none";
  const GgufTensor* rope_freqs = f.find_tensor("rope_freqs.weight");
  if (rope_freqs && (!a.permuted_qk || scaling != "none"))
    throw LoadError(f.path() + ": tensor 'rope_freqs.weight': per-frequency RoPE factors are supported for llama "
                    "without another rope.scaling.type");
  if (rope_freqs) {
    const int64_t rope_dim = has("rope.dimension_count") ? get_int("rope.dimension_count") : head_dim;
    c.add("rope_scaling", llama3_rope_scaling(f, *rope_freqs, has("rope.freq_base") ? get_float("rope.freq_base") : 10000.0,
                                              rope_dim));
  } else if (scaling == "linear" || scaling == "yarn") {
    JsonObject r;
    r.add_string("rope_type", scaling);
    r.add_float("factor", get_float("rope.scaling.factor"));
    if (has("rope.scaling.original_context_length"))
      r.add_int("original_max_position_embeddings", get_int("rope.scaling.original_context_length"));
    for (const char* beta : {"beta_fast", "beta_slow"})
      if (scaling == "yarn" && has(std::string("rope.scaling.yarn_") + beta))
        r.add_float(beta, get_float(std::string("rope.scaling.yarn_") + beta));
    if (std::string(a.gguf) == "mistral3") {
      // The converter's yarn_log_multiplier is mscale_all_dim beside Ministral 3's mscale of 1 (llama.cpp reads it
      // so); its temperature scale is llama_4_scaling_beta, which transformers reads from the rope dict.
      if (has("rope.scaling.yarn_log_multiplier")) {
        r.add_float("mscale", 1.0);
        r.add_float("mscale_all_dim", get_float("rope.scaling.yarn_log_multiplier"));
      }
      if (has("attention.temperature_scale"))
        r.add_float("llama_4_scaling_beta", get_float("attention.temperature_scale"));
    }
    if (std::string(a.gguf) == "gpt-oss" && scaling == "yarn") r.add_bool("truncate", false);
    c.add("rope_scaling", r.str());
  } else if (scaling != "none") {
    throw LoadError(f.path() + ": key '" + p + "rope.scaling.type': '" + scaling + "' is not supported");
  }

  gguf_hf::add_vocab_and_dtype(c, f);
  gguf_hf::add_rotary_share(c, m, mixtral ? "mixtral" : mistral ? "mistral" : a.model_type, head_dim);
  if (is_phi3(a)) add_phi3_config(c, f, head_dim);
  add_sigmoid_moe_config(c, f, a.gguf);
  if (has("logit_scale")) {  // Cohere: LayerNorms (their epsilon), the logit scale, cohere2's window
    c.add_float("logit_scale", get_float("logit_scale"));
    if (has("attention.layer_norm_epsilon")) c.add_float("layer_norm_eps", get_float("attention.layer_norm_epsilon"));
    if (has("attention.sliding_window")) c.add_int("sliding_window", get_int("attention.sliding_window"));
  }

  if (std::string(a.gguf) == "gpt-oss") add_gpt_oss_config(c, f, layers, has("feed_forward_length"));
  if (a.moe || mixtral) {
    c.add_int("num_experts", get_int("expert_count"));
    c.add_int("num_experts_per_tok", get_int("expert_used_count"));
    if (!mixtral) c.add_int("moe_intermediate_size", get_int("expert_feed_forward_length"));
    c.add_bool("norm_topk_prob", true);  // llama.cpp's qwen3moe graph always renormalizes the top-k weights
    c.add_int("decoder_sparse_step", 1);
    c.add("mlp_only_layers", "[]");
  }
  if (a.norm_plus_one) {
    c.add_string("hidden_activation", "gelu_pytorch_tanh");
    c.add_string("hidden_act", "gelu_pytorch_tanh");
    // llama.cpp's rule for the attention scale: 1/sqrt(hidden / heads) for the 27B models (46 and 62 layers),
    // 1/sqrt(head_dim) otherwise; the GGUF has no key for it.
    const bool big = (std::string(a.gguf) == "gemma2" && layers == 46) || (std::string(a.gguf) == "gemma3" && layers == 62);
    if (std::string(a.gguf) != "gemma") c.add_float("query_pre_attn_scalar", double(big ? hidden / heads : head_dim));
    if (has("attention.sliding_window")) c.add_int("sliding_window", get_int("attention.sliding_window"));
    if (has("attn_logit_softcapping")) c.add_float("attn_logit_softcapping", get_float("attn_logit_softcapping"));
    if (has("final_logit_softcapping")) c.add_float("final_logit_softcapping", get_float("final_logit_softcapping"));
    if (std::string(a.gguf) == "gemma3") {
      c.add_float("rope_local_base_freq", 10000.0);  // fixed in llama.cpp too
      // Which layers slide: a period n (layer i slides unless (i + 1) % n == 0, as in transformers) or one bool
      // per layer; without the key, transformers' and llama.cpp's default period of 6.
      const std::string key = p + "attention.sliding_window_pattern";
      if (const GgufValue* v = f.find(key); v && v->is_array()) {
        if (v->elem_type() != GgufType::BOOL || int64_t(v->size()) != layers)
          throw LoadError(f.path() + ": key '" + key + "': expected " + std::to_string(layers) + " bools (one per layer)");
        std::string types = "[";
        for (uint64_t i = 0; i < v->size(); ++i)
          types += std::string(i ? ", " : "") + (v->at(i).as_bool(key) ? "\"sliding_attention\"" : "\"full_attention\"");
        c.add("layer_types", types + "]");
      } else if (v) {
        c.add_int("sliding_window_pattern", f.get_int(key));
      }
    }
  } else {
    c.add_string("hidden_act", "silu");
  }
  return c.str();
}

std::optional<GgufArchOf> gguf_arch_for_hf(const std::string& hf_class) {
  if (hf_class == "MixtralForCausalLM") return GgufArchOf{"llama", true, false};  // llama with stacked experts
  if (hf_class == "MistralForCausalLM") return GgufArchOf{"llama", true, false};  // the converter's LlamaModel
  // the converter writes the wrapper's text model (Mistral or Ministral 3) as mistral3, its vision tower apart
  if (hf_class == "Mistral3ForConditionalGeneration") return GgufArchOf{"mistral3", true, false};
  if (hf_class == "DeepseekV2ForCausalLM") return GgufArchOf{"deepseek2", false, false};
  for (const Arch& a : kArchs)
    if (hf_class == a.hf_class) return GgufArchOf{a.gguf, a.permuted_qk, a.norm_plus_one};
  return std::nullopt;
}

std::optional<std::string> gguf_tensor_name(const std::string& gguf_arch, const std::string& hf_name) {
  const Arch* arch = nullptr;
  for (const Arch& a : kArchs)
    if (gguf_arch == a.gguf) arch = &a;
  if (!arch) return std::nullopt;
  if (hf_name == "model.embed_tokens.weight") return std::string("token_embd.weight");
  if (hf_name == "model.norm.weight") return std::string("output_norm.weight");
  if (hf_name == "lm_head.weight") return std::string("output.weight");
  constexpr std::string_view kLayers = "model.layers.";
  if (!hf_name.starts_with(kLayers)) return std::nullopt;
  const size_t dot = hf_name.find('.', kLayers.size());
  if (dot == std::string::npos) return std::nullopt;
  const std::string layer = hf_name.substr(kLayers.size(), dot - kLayers.size());
  auto block = split_block("blk." + layer + ".x");
  if (!block) return std::nullopt;
  const std::string rest = hf_name.substr(dot + 1);
  const size_t ext_at = rest.rfind('.');
  if (ext_at == std::string::npos) return std::nullopt;
  const std::string suffix = rest.substr(0, ext_at), ext = rest.substr(ext_at);
  for (const ArchName& n : kArchNames)
    if (gguf_arch == n.arch && rest == n.hf) return "blk." + layer + "." + n.gguf;  // a whole-name entry
  if (ext != ".weight" && ext != ".bias") return std::nullopt;
  for (const ArchName& n : kArchNames)
    if (gguf_arch == n.arch && suffix == n.hf) return "blk." + layer + "." + n.gguf + ext;
  for (const char* base : {"ffn_norm", "post_attention_norm"})
    if (norm_suffix(*arch, base) == suffix) return "blk." + layer + "." + base + ext;
  for (const auto& [g, h] : kBlockNames)
    if (suffix == h) return "blk." + layer + "." + g + ext;
  return std::nullopt;
}

namespace {
// GGUF row h*D + 2j + i <-> Hugging Face row h*D + i*D/2 + j; `to_gguf` picks the direction.
void rope_rows(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t row_bytes, int64_t heads, bool to_gguf) {
  if (rows <= 0 || row_bytes <= 0 || heads <= 0) return;  // nothing to move (and no null pointer to memcpy)
  const int64_t D = rows / heads, half = D / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < half; ++j) {
        const int64_t hf = h * D + i * half + j, gg = h * D + 2 * j + i;
        std::memcpy(dst + (to_gguf ? gg : hf) * row_bytes, src + (to_gguf ? hf : gg) * row_bytes, size_t(row_bytes));
      }
}
}  // namespace

void unpermute_rope_rows(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t row_bytes, int64_t heads) {
  rope_rows(src, dst, rows, row_bytes, heads, false);
}
void permute_rope_rows(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t row_bytes, int64_t heads) {
  rope_rows(src, dst, rows, row_bytes, heads, true);
}

std::vector<GgufHfTensor> gguf_hf_tensors(const GgufFile& f) {
  if (gguf_is_hybrid(f)) return gguf_hf::sorted_unique(f, gguf_hybrid_tensors(f));
  const Arch& a = find_arch(f);
  const std::string p = std::string(a.gguf) + ".";
  std::vector<GgufHfTensor> out;
  auto fail = [&](const GgufTensor& t, const std::string& m) { throw LoadError(f.path() + ": tensor '" + t.name + "': " + m); };
  for (const GgufTensor& t : f.tensors()) {
    GgufHfTensor h = gguf_hf::as_stored(t, "");
    const size_t dot = t.name.rfind('.');
    const std::string base = dot == std::string::npos ? t.name : t.name.substr(0, dot);
    const std::string ext = dot == std::string::npos ? "" : t.name.substr(dot);  // ".weight" / ".bias"
    if (t.name == "token_embd.weight") {
      h.hf_name = "model.embed_tokens.weight";
    } else if (t.name == "output_norm.weight") {
      h.hf_name = "model.norm.weight";
    } else if (t.name == "output.weight") {
      h.hf_name = "lm_head.weight";
    } else if (auto blk = split_block(t.name)) {
      const std::string layer = "model.layers." + std::to_string(blk->first) + ".";
      const size_t d = blk->second.rfind('.');
      const std::string bbase = blk->second.substr(0, d == std::string::npos ? blk->second.size() : d);
      if (std::string(a.gguf) == "gpt-oss" && add_gpt_oss_tensor(f, t, layer, blk->second, out)) continue;
      // MiniMax-M2 keeps Mixtral's block_sparse_moe prefix (its builder reads either projection naming)
      const std::string experts =
          layer + (std::string(a.gguf) == "minimax-m2" ? "block_sparse_moe" : "mlp") + ".experts.";
      if ((a.moe || f.has(p + "expert_count")) && gguf_hf::add_expert_slices(f, t, experts, bbase, out)) continue;
      if (std::string(a.gguf) == "deepseek2" && add_deepseek2_kv_b(f, t, blk->first, bbase, out)) continue;
      auto suffix = block_suffix(a, bbase, blk->second.substr(bbase.size()));
      if (!suffix) fail(t, "no Hugging Face counterpart for a " + std::string(a.gguf) + " model");
      h.hf_name = layer + *suffix;
      if (a.permuted_qk && (bbase == "attn_q" || bbase == "attn_k")) {
        h.fix = GgufFix::unpermute_rope_rows;
        const std::string key = p + (bbase == "attn_q" ? "attention.head_count" : "attention.head_count_kv");
        h.heads = f.has(key) ? f.get_int(key) : f.get_int(p + "attention.head_count");
        const int64_t rows = h.shape[0];
        // An empty row takes no bytes, so the file does not bound the row count: the heads' bound keeps the
        // permutation's loop short (and 2 * heads from overflowing).
        if (h.heads > config_count_limit("num_attention_heads"))
          fail(t, "'" + key + "' is " + std::to_string(h.heads) + ", over the " +
                      std::to_string(config_count_limit("num_attention_heads")) + " any model has");
        if (h.heads <= 0 || rows % (2 * h.heads) != 0)
          fail(t, std::to_string(rows) + " rows do not split into " + std::to_string(h.heads) + " heads of even size ('" +
                      key + "')");
        if (t.ne.size() == 1 && quant_type_info(uint32_t(t.type))->block_elems != 1)
          fail(t, "a quantized 1-D tensor cannot be permuted row by row");
      }
    } else if (t.name == "rope_freqs.weight" && a.permuted_qk) {
      continue;  // read into the config's rope_scaling (llama3_rope_scaling)
    } else if (is_phi3(a) && is_phi3_rope_factors(t.name)) {
      continue;  // read into the config's rope_scaling (add_phi3_config)
    } else {
      fail(t, "no Hugging Face counterpart for a " + std::string(a.gguf) + " model");
    }
    if (a.norm_plus_one && t.name.ends_with("norm.weight")) {
      if (!gguf_hf::plain_float(t.type))
        fail(t, std::string("norm weights stored as ") + quant_type_name(t.type) + " cannot have Gemma's +1 taken off");
      h.fix = GgufFix::subtract_one;
    }
    out.push_back(std::move(h));
  }
  return gguf_hf::sorted_unique(f, std::move(out));
}

GgufHfBytes undo_gguf_fix(const GgufHfTensor& t, const std::string& file) {
  GgufHfBytes out;
  out.type = t.type;
  auto float_type = [&]() {
    if (!gguf_hf::plain_float(t.type))
      throw LoadError(file + ": tensor '" + t.gguf_name + "': stored as " + quant_type_name(t.type) +
                      ", which cannot be turned back into '" + t.hf_name + "' (F32, F16 or BF16 expected)");
    return t.type == QuantType::F32 ? DType::f32 : t.type == QuantType::F16 ? DType::f16 : DType::bf16;
  };
  switch (t.fix) {
    case GgufFix::none:
    case GgufFix::untile_value_heads:
      out.bytes.assign(t.data, t.data + t.bytes);
      break;
    case GgufFix::unpermute_rope_rows: {
      out.bytes.resize(size_t(t.bytes));
      const bool one_d = t.shape.size() == 1;
      const int64_t rows = t.shape[0];
      const int64_t row_bytes = one_d ? quant_type_info(uint32_t(t.type))->block_bytes : t.bytes / std::max<int64_t>(1, rows);
      unpermute_rope_rows(t.data, out.bytes.data(), rows, row_bytes, t.heads);
      break;
    }
    case GgufFix::subtract_one: {
      const DType dt = float_type();
      out.bytes.resize(size_t(t.bytes));
      const int64_t n = t.bytes / int64_t(dtype_size(dt));
      for (int64_t i = 0; i < n; ++i) store_from_f32(out.bytes.data(), dt, i, load_as_f32(t.data, dt, i) - 1.0f);
      break;
    }
    case GgufFix::log_of_negated: {
      // The converter wrote -exp(A_log) in f32 (or rounded to f16 / bf16); log(-A) gives A_log back to within
      // that rounding.
      const DType dt = float_type();
      const int64_t n = t.bytes / int64_t(dtype_size(dt));
      out.type = QuantType::F32;
      out.bytes.resize(size_t(n) * sizeof(float));
      for (int64_t i = 0; i < n; ++i) {
        const double a = load_as_f32(t.data, dt, i);
        if (!(a < 0) || !std::isfinite(a))
          throw LoadError(file + ": tensor '" + t.gguf_name + "': value " + std::to_string(a) + " at " + std::to_string(i) +
                          " is not negative and finite, so it is not -exp(A_log)");
        store_from_f32(out.bytes.data(), DType::f32, i, float(std::log(-a)));
      }
      break;
    }
    case GgufFix::join_kv_b:
      return join_kv_b(t, file);
  }
  if (t.value_heads.key_heads > 0) untile_value_heads(t, out, file);
  return out;
}

}  // namespace attnzoo

namespace attnzoo::gguf_hf {

void add_vocab_and_dtype(JsonObject& c, const GgufFile& f) {
  const GgufTensor* embed = f.find_tensor("token_embd.weight");
  if (embed && embed->ne.size() == 2) {
    c.add_int("vocab_size", embed->ne[1]);
  } else if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens"); tokens && tokens->is_array()) {
    c.add_int("vocab_size", int64_t(tokens->size()));
  } else {
    c.add_int("vocab_size", f.get_int(f.get_string("general.architecture") + ".vocab_size"));
  }
  c.add_bool("tie_word_embeddings", f.find_tensor("output.weight") == nullptr);
  for (const auto& [hf, gg] : {std::pair{"bos_token_id", "bos"}, {"eos_token_id", "eos"}, {"pad_token_id", "padding"}}) {
    const std::string key = std::string("tokenizer.ggml.") + gg + "_token_id";
    if (f.has(key)) c.add_int(hf, f.get_int(key));
  }
  c.add_string("torch_dtype", dtype_name_of(embed ? embed->type : QuantType::F32));
}

GgufHfTensor as_stored(const GgufTensor& t, std::string hf_name) {
  GgufHfTensor h;
  h.hf_name = std::move(hf_name);
  h.gguf_name = t.name;
  h.shape = torch_shape(t);
  h.type = t.type;
  h.data = t.data;
  h.bytes = t.bytes;
  return h;
}

void check_expert_stack(const GgufFile& f, const GgufTensor& t, int64_t experts, bool empty_rows) {
  // Each expert of a stack becomes entries of the tensor map, so 0-byte stacks (empty rows) of thousands of
  // experts, in as many made-up blocks, would let a small file ask for gigabytes of entries.
  if (empty_rows && experts > 0) fail(f, t.name, std::to_string(experts) + " experts of empty rows");
  const Meta m{f, f.get_string("general.architecture") + "."};
  const int64_t want = m.has("expert_count") ? m.count("expert_count", "num_experts") : 1;  // Jamba's default
  if (experts != want)
    fail(f, t.name, std::to_string(experts) + " experts, but '" + m.p + "expert_count' is " + std::to_string(want));
  if (const auto blk = split_block(t.name); blk && blk->first >= m.layers())
    fail(f, t.name, "block " + std::to_string(blk->first) + " of the " + std::to_string(m.layers()) + " in '" + m.p +
                        "block_count'");
}

bool add_expert_slices(const GgufFile& f, const GgufTensor& t, const std::string& prefix, const std::string& base,
                       std::vector<GgufHfTensor>& out, const ExpertProjNames& names) {
  const bool fused = base == "ffn_gate_up_exps";  // the converter's optional fusion: gate rows, then up rows
  if (!fused && base != "ffn_gate_exps" && base != "ffn_up_exps" && base != "ffn_down_exps") return false;
  if (t.ne.size() != 3)
    throw LoadError(f.path() + ": tensor '" + t.name + "': expected 3 dimensions (experts stacked), got " +
                    std::to_string(t.ne.size()));
  if (fused && t.ne[1] % 2 != 0)
    throw LoadError(f.path() + ": tensor '" + t.name + "': " + std::to_string(t.ne[1]) +
                    " rows per expert do not split into gate and up halves");
  const std::string proj = fused || base == "ffn_gate_exps" ? names.gate
                           : base == "ffn_up_exps"            ? names.up
                                                              : names.down;
  const int64_t experts = t.ne[2], per = experts ? t.bytes / experts : 0;
  // An empty expert (ne[0] or ne[1] 0) takes no bytes, so the file does not bound ne[2]: the config's bound does.
  if (experts > config_count_limit("num_experts"))
    throw LoadError(f.path() + ": tensor '" + t.name + "': " + std::to_string(experts) + " experts, over the " +
                    std::to_string(config_count_limit("num_experts")) + " any model has");
  check_expert_stack(f, t, experts, t.ne[0] == 0 || t.ne[1] == 0);
  for (int64_t e = 0; e < experts; ++e) {
    GgufHfTensor x = as_stored(t, prefix + std::to_string(e) + "." + proj + ".weight");
    x.shape = {fused ? t.ne[1] / 2 : t.ne[1], t.ne[0]};
    x.data = t.data + e * per;
    x.bytes = fused ? per / 2 : per;  // whole rows: an even row count halves the bytes exactly
    if (fused) {
      GgufHfTensor up = x;
      up.hf_name = prefix + std::to_string(e) + "." + names.up + ".weight";
      up.data = x.data + x.bytes;
      out.push_back(std::move(up));
    }
    out.push_back(std::move(x));
  }
  return true;
}

std::vector<GgufHfTensor> sorted_unique(const GgufFile& f, std::vector<GgufHfTensor> out) {
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.hf_name < y.hf_name; });
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].hf_name == out[i - 1].hf_name)
      throw LoadError(f.path() + ": tensors '" + out[i - 1].gguf_name + "' and '" + out[i].gguf_name + "' both map to '" +
                      out[i].hf_name + "'");
  return out;
}

}  // namespace attnzoo::gguf_hf
