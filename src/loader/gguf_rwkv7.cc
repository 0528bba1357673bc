#include "loader/gguf_rwkv7.h"

#include "loader/gguf_hf_util.h"
#include "loader/load_error.h"

namespace attnzoo {
namespace {

using gguf_hf::fail;
using gguf_hf::plain_float;

// GGUF block tensors (after "blk.N.") and fla's (after "model.layers.N."), both directions.
constexpr std::pair<const char*, const char*> kBlockNames[] = {
    {"attn_norm.weight", "attn_norm.weight"},
    {"attn_norm.bias", "attn_norm.bias"},
    {"attn_norm_2.weight", "ffn_norm.weight"},
    {"attn_norm_2.bias", "ffn_norm.bias"},
    {"time_mix_k_k.weight", "attn.k_k"},
    {"time_mix_k_a.weight", "attn.k_a"},
    {"time_mix_r_k.weight", "attn.r_k"},
    {"time_mix_receptance.weight", "attn.r_proj.weight"},
    {"time_mix_key.weight", "attn.k_proj.weight"},
    {"time_mix_value.weight", "attn.v_proj.weight"},
    {"time_mix_output.weight", "attn.o_proj.weight"},
    {"time_mix_w0.weight", "attn.w_lora.lora.2.bias"},
    {"time_mix_w1.weight", "attn.w_lora.lora.0.weight"},
    {"time_mix_w2.weight", "attn.w_lora.lora.2.weight"},
    {"time_mix_a0.weight", "attn.a_lora.lora.2.bias"},
    {"time_mix_a1.weight", "attn.a_lora.lora.0.weight"},
    {"time_mix_a2.weight", "attn.a_lora.lora.2.weight"},
    {"time_mix_v0.weight", "attn.v_lora.lora.2.bias"},
    {"time_mix_v1.weight", "attn.v_lora.lora.0.weight"},
    {"time_mix_v2.weight", "attn.v_lora.lora.2.weight"},
    {"time_mix_g1.weight", "attn.g_lora.lora.0.weight"},
    {"time_mix_g2.weight", "attn.g_lora.lora.2.weight"},
    {"time_mix_ln.weight", "attn.g_norm.weight"},
    {"time_mix_ln.bias", "attn.g_norm.bias"},
    {"channel_mix_lerp_k.weight", "ffn.x_k"},
    {"channel_mix_key.weight", "ffn.key.weight"},
    {"channel_mix_value.weight", "ffn.value.weight"},
};

constexpr std::pair<const char*, const char*> kGlobalNames[] = {
    {"token_embd.weight", "model.embeddings.weight"},    {"token_embd_norm.weight", "model.layers.0.pre_norm.weight"},
    {"token_embd_norm.bias", "model.layers.0.pre_norm.bias"}, {"output_norm.weight", "model.norm.weight"},
    {"output_norm.bias", "model.norm.bias"},             {"output.weight", "lm_head.weight"},
};

// fla's block tensor for a GGUF one (after "blk.N."), or nullptr.
const char* fla_name(const std::string& rest) {
  for (const auto& [g, h] : kBlockNames)
    if (rest == g) return h;
  return nullptr;
}

}  // namespace

std::string gguf_rwkv7_config_json(const GgufFile& f) {
  const gguf_hf::Meta m{f, "rwkv7."};
  gguf_hf::JsonObject c;
  c.add("architectures", "[\"RWKV7ForCausalLM\"]");
  c.add_string("model_type", "rwkv7");
  const int64_t hidden = m.count("embedding_length", "hidden_size"), head_dim = m.count("wkv.head_size", "head_dim");
  c.add_int("hidden_size", hidden);
  c.add_int("num_hidden_layers", m.layers());
  c.add_int("head_dim", head_dim);
  c.add_int("num_heads", m.ratio(hidden, "embedding_length", head_dim, "wkv.head_size"));
  c.add_int("intermediate_size", m.positive("feed_forward_length"));
  c.add_float("norm_eps", m.has("attention.layer_norm_epsilon") ? m.d("attention.layer_norm_epsilon") : 1e-5);
  c.add_int("decay_low_rank_dim", m.positive("attention.decay_lora_rank"));
  c.add_int("a_low_rank_dim", m.positive("attention.iclr_lora_rank"));
  c.add_int("v_low_rank_dim", m.positive("attention.value_residual_mix_lora_rank"));
  c.add_int("gate_low_rank_dim", m.positive("attention.gate_lora_rank"));
  // fla's value_dim may differ from hidden_size; the value projection states it (the same in every layer).
  if (const GgufTensor* v = f.find_tensor("blk.0.time_mix_value.weight"); v && v->ne.size() == 2)
    c.add_int("value_dim", v->ne[1]);
  c.add_bool("norm_first", f.find_tensor("token_embd_norm.weight") != nullptr);
  c.add_bool("norm_bias", gguf_hf::any_block_has(f, "attn_norm.bias"));
  c.add_string("hidden_act", "sqrelu");
  gguf_hf::add_vocab_and_dtype(c, f);
  return c.str();
}

std::vector<GgufHfTensor> gguf_rwkv7_tensors(const GgufFile& f) {
  const gguf_hf::Meta m{f, "rwkv7."};
  const int64_t hidden = m.count("embedding_length", "hidden_size"), head_dim = m.count("wkv.head_size", "head_dim");
  const int64_t heads = m.ratio(hidden, "embedding_length", head_dim, "wkv.head_size");
  std::vector<GgufHfTensor> out;
  for (const GgufTensor& t : f.tensors()) {
    bool global = false;
    for (const auto& [g, h] : kGlobalNames)
      if (t.name == g) out.push_back(gguf_hf::as_stored(t, h)), global = true;
    if (global) continue;
    const auto blk = gguf_hf::split_block(t.name);
    if (!blk) fail(f, t.name, "no counterpart in an RWKV7ForCausalLM checkpoint");
    const std::string layer = "model.layers." + std::to_string(blk->first) + ".";
    const std::string& rest = blk->second;
    if (rest == "time_mix_lerp_fused.weight") {
      if (t.ne.size() != 4 || t.ne[0] != hidden || t.ne[1] != 1 || t.ne[2] != 1 || t.ne[3] != 6 || !plain_float(t.type))
        fail(f, t.name, "expected F32 / F16 / BF16 [6, 1, 1, " + std::to_string(hidden) +
                            "] (x_r, x_w, x_k, x_v, x_a, x_g stacked)");
      const int64_t per = t.bytes / 6;
      const char* parts[] = {"x_r", "x_w", "x_k", "x_v", "x_a", "x_g"};
      for (int64_t i = 0; i < 6; ++i) {
        GgufHfTensor h = gguf_hf::as_stored(t, layer + "attn." + parts[i]);
        h.shape = {1, 1, hidden};
        h.data = t.data + i * per;
        h.bytes = per;
        out.push_back(std::move(h));
      }
      continue;
    }
    // The converter's stand-in value LoRA of layer 0 (a copy of its a-LoRA); fla's layer 0 has none.
    if (blk->first == 0 && rest.starts_with("time_mix_v") && rest != "time_mix_value.weight") continue;
    const char* name = fla_name(rest);
    if (!name) fail(f, t.name, "no counterpart in an RWKV7ForCausalLM checkpoint");
    GgufHfTensor h = gguf_hf::as_stored(t, layer + name);
    if (rest == "time_mix_r_k.weight") {
      if (t.numel() != hidden) fail(f, t.name, "expected " + std::to_string(hidden) + " values (heads x head_size)");
      h.shape = {heads, head_dim};
    } else if (rest == "time_mix_k_k.weight" || rest == "time_mix_k_a.weight" || rest == "channel_mix_lerp_k.weight") {
      h.shape = {t.numel()};  // squeezed by the converter; fla holds [C]
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::optional<std::string> gguf_rwkv7_tensor_name(const std::string& fla) {
  for (const auto& [g, h] : kGlobalNames)
    if (fla == h) return std::string(g);
  const auto split = gguf_hf::split_hf_layer(fla);
  for (const auto& [g, h] : kBlockNames)
    if (split && split->second == h) return "blk." + split->first + "." + g;
  return std::nullopt;
}

}  // namespace attnzoo
