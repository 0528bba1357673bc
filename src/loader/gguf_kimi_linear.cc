#include "loader/gguf_kimi_linear.h"

#include "loader/gguf_deepseek2.h"
#include "loader/gguf_hf_util.h"

namespace attnzoo {
namespace {

using gguf_hf::fail;
using gguf_hf::JsonObject;
using gguf_hf::Meta;

constexpr int64_t kSigmoid = 2;  // llama.cpp's expert_gating_func

// Block tensors after "blk.N." and "model.layers.N.": a base the extension (.weight / .bias) is added to on both
// sides, or, with `whole`, the full names.
struct Name {
  const char* gguf;
  const char* hf;
  bool whole = false;
};
constexpr Name kNames[] = {
    {"attn_norm", "input_layernorm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_a", "self_attn.q_a_proj"},
    {"attn_q_b", "self_attn.q_b_proj"},
    {"attn_q_a_norm", "self_attn.q_a_layernorm"},
    {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"},
    {"attn_kv_a_norm", "self_attn.kv_a_layernorm"},
    {"attn_kv_b", "self_attn.kv_b_proj"},
    {"ssm_conv1d_q", "self_attn.q_conv1d"},
    {"ssm_conv1d_k", "self_attn.k_conv1d"},
    {"ssm_conv1d_v", "self_attn.v_conv1d"},
    {"ssm_f_a", "self_attn.f_a_proj"},
    {"ssm_f_b", "self_attn.f_b_proj"},
    {"ssm_beta", "self_attn.b_proj"},
    {"ssm_g_a", "self_attn.g_a_proj"},
    {"ssm_g_b", "self_attn.g_b_proj"},
    {"ssm_norm", "self_attn.o_norm"},
    {"ssm_a", "self_attn.A_log", true},
    {"ssm_dt.bias", "self_attn.dt_bias", true},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    {"ffn_gate_inp", "block_sparse_moe.gate"},
    {"exp_probs_b.bias", "block_sparse_moe.gate.e_score_correction_bias", true},
    {"ffn_gate_shexp", "block_sparse_moe.shared_experts.gate_proj"},
    {"ffn_up_shexp", "block_sparse_moe.shared_experts.up_proj"},
    {"ffn_down_shexp", "block_sparse_moe.shared_experts.down_proj"},
};

// `rest` of one side's block name looked up in kNames (`to_hf`: from GGUF), or nullopt.
std::optional<std::string> rename_block(const std::string& rest, bool to_hf) {
  const size_t dot = rest.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : rest.substr(dot);
  for (const Name& n : kNames) {
    const std::string from = to_hf ? n.gguf : n.hf, to = to_hf ? n.hf : n.gguf;
    if (n.whole ? rest == from : (ext == ".weight" || ext == ".bias") && rest == from + ext)
      return n.whole ? to : to + ext;
  }
  return std::nullopt;
}

}  // namespace

std::string gguf_kimi_linear_config_json(const GgufFile& f) {
  const Meta m{f, "kimi-linear."};
  auto key_error = [&](const std::string& key, const std::string& msg) {
    return LoadError(f.path() + ": key 'kimi-linear." + key + "': " + msg);
  };
  JsonObject c;
  gguf_hf::add_class(c, "KimiLinearForCausalLM", "kimi_linear");
  const int64_t layers = m.layers(), heads = m.count("attention.head_count", "num_attention_heads");
  c.add_int("hidden_size", m.positive("embedding_length"));
  c.add_int("num_hidden_layers", layers);
  c.add_int("num_attention_heads", heads);
  c.add_int("num_key_value_heads", heads);  // MLA: every head reads the latent (the file's 1 is llama.cpp's view)
  if (m.has("feed_forward_length")) c.add_int("intermediate_size", m.positive("feed_forward_length"));
  c.add_float("rms_norm_eps", m.eps());
  if (m.has("context_length")) c.add_int("model_max_length", m.positive("context_length"));
  std::string types = "[";
  const gguf_hf::AttentionLayers attn = gguf_hf::attention_layers(m, layers, heads);
  for (size_t i = 0; i < attn.attends.size(); ++i)
    types += std::string(i ? ", " : "") + (attn.attends[i] ? "\"full_attention\"" : "\"linear_attention\"");
  c.add("layer_types", types + "]");

  // MLA: q LoRA only when the key is there (else a plain attn_q); the per-head widths from the _mla keys.
  if (m.has("attention.q_lora_rank")) c.add_int("q_lora_rank", m.count("attention.q_lora_rank", "q_lora_rank"));
  const int64_t rope = m.count("rope.dimension_count", "qk_rope_head_dim");
  const int64_t qk = m.count("attention.key_length_mla", "head_dim");
  if (qk <= rope)
    throw key_error("attention.key_length_mla", std::to_string(qk) + " leaves no non-rotary channels beside "
                    "rope.dimension_count " + std::to_string(rope));
  c.add_int("kv_lora_rank", m.count("attention.kv_lora_rank", "kv_lora_rank"));
  c.add_int("qk_rope_head_dim", rope);
  c.add_int("qk_nope_head_dim", qk - rope);
  c.add_int("v_head_dim", m.count("attention.value_length_mla", "v_head_dim"));
  c.add_int("linear_num_heads", heads);
  c.add_int("linear_head_dim", m.count("kda.head_dim", "head_dim"));
  c.add_int("linear_conv_kernel_dim", m.count("ssm.conv_kernel", "conv_kernel"));

  // MoE: none without expert_count (every layer dense).
  c.add_int("first_k_dense_replace", m.has("leading_dense_block_count") ? m.i("leading_dense_block_count") : 0);
  if (m.has("expert_count")) {
    if (m.has("expert_gating_func") && m.i("expert_gating_func") != kSigmoid)
      throw key_error("expert_gating_func", "expected 2 (sigmoid): Kimi Linear's router is a sigmoid");
    c.add_int("num_experts", m.count("expert_count", "num_experts"));
    c.add_int("num_experts_per_token", m.count("expert_used_count", "num_experts_per_tok"));
    c.add_int("moe_intermediate_size", m.count("expert_feed_forward_length", "moe_intermediate_size"));
    const bool shared = m.has("expert_shared_count") && m.i("expert_shared_count") != 0;  // 0: none, else bounded
    c.add_int("num_shared_experts", shared ? m.count("expert_shared_count", "n_shared_experts") : 0);
    c.add_int("num_expert_group", m.has("expert_group_count") ? m.positive("expert_group_count") : 1);
    c.add_int("topk_group", m.has("expert_group_used_count") ? m.positive("expert_group_used_count") : 1);
    c.add_bool("moe_renormalize", true);  // llama.cpp's kimi-linear always renormalizes
    // llama.cpp scales by expert_weights_scale unless it is absent or 0
    const double scale = m.has("expert_weights_scale") ? m.d("expert_weights_scale") : 0.0;
    c.add_float("routed_scaling_factor", scale != 0.0 ? scale : 1.0);
  }
  c.add_string("hidden_act", "silu");
  gguf_hf::add_vocab_and_dtype(c, f);
  return c.str();
}

std::vector<GgufHfTensor> gguf_kimi_linear_tensors(const GgufFile& f) {
  std::vector<GgufHfTensor> out;
  for (const GgufTensor& t : f.tensors()) {
    if (t.name == "token_embd.weight" || t.name == "output_norm.weight" || t.name == "output.weight") {
      out.push_back(gguf_hf::as_stored(t, t.name == "token_embd.weight"    ? "model.embed_tokens.weight"
                                          : t.name == "output_norm.weight" ? "model.norm.weight"
                                                                           : "lm_head.weight"));
      continue;
    }
    const auto blk = gguf_hf::split_block(t.name);
    if (!blk) fail(f, t.name, "no counterpart in a KimiLinearForCausalLM checkpoint");
    const std::string layer = "model.layers." + std::to_string(blk->first) + ".";
    const std::string& rest = blk->second;
    const std::string base = rest.substr(0, rest.rfind('.') == std::string::npos ? rest.size() : rest.rfind('.'));
    if (gguf_hf::add_expert_slices(f, t, layer + "block_sparse_moe.experts.", base, out, {"w1", "w3", "w2"})) continue;
    if (add_deepseek2_kv_b(f, t, blk->first, base, out)) continue;
    const auto hf = rename_block(rest, /*to_hf=*/true);
    if (!hf) fail(f, t.name, "no counterpart in a KimiLinearForCausalLM checkpoint");
    GgufHfTensor h = gguf_hf::as_stored(t, layer + *hf);
    if (base.starts_with("ssm_conv1d_")) {  // ne [kernel, 1, channels(, 1)] -> [channels, 1, kernel]
      if ((t.ne.size() != 3 && t.ne.size() != 4) || t.ne[1] != 1 || (t.ne.size() == 4 && t.ne[3] != 1))
        fail(f, t.name, "expected a [1, channels, 1, kernel] (or [channels, 1, kernel]) short-conv kernel");
      h.shape = {t.ne[2], 1, t.ne[0]};
    } else if (rest == "ssm_a") {  // [1, heads] or [1, 1, heads, 1]: A = -exp(A_log), read back as A_log
      if (!gguf_hf::plain_float(t.type))
        fail(f, t.name, std::string("stored as ") + quant_type_name(t.type) + ", which cannot be turned back into '" +
                            h.hf_name + "' (F32, F16 or BF16 expected)");
      h.shape = {1, 1, t.numel(), 1};
      h.fix = GgufFix::log_of_negated;
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::optional<std::string> gguf_kimi_linear_tensor_name(const std::string& hf_name) {
  if (hf_name == "model.embed_tokens.weight") return std::string("token_embd.weight");
  if (hf_name == "model.norm.weight") return std::string("output_norm.weight");
  if (hf_name == "lm_head.weight") return std::string("output.weight");
  const auto split = gguf_hf::split_hf_layer(hf_name);
  if (!split) return std::nullopt;
  std::string rest = split->second;
  // Moonshot's checkpoints call the dense layers' MLP block_sparse_moe too
  for (const char* proj : {"gate_proj.", "up_proj.", "down_proj."})
    if (rest.starts_with(std::string("block_sparse_moe.") + proj)) rest = "mlp." + rest.substr(17);
  if (rest.ends_with("kv_b_proj.weight")) return std::nullopt;  // split per head by the writer
  const auto gguf = rename_block(rest, /*to_hf=*/false);
  return gguf ? std::optional<std::string>("blk." + split->first + "." + *gguf) : std::nullopt;
}

}  // namespace attnzoo
