#include "loader/gguf_deepseek2.h"

#include <cstring>

#include "core/error.h"
#include "kernels/quant/quant.h"
#include "loader/gguf_hf_util.h"

namespace attnzoo {
namespace {

using gguf_hf::JsonObject;

constexpr int64_t kSoftmax = 1, kSigmoid = 2;  // llama.cpp's expert_gating_func values

// The piece of GGUF tensor `t` (all of it) for join_kv_b.
GgufPiece whole(const GgufTensor& t) {
  GgufPiece p;
  p.start = p.data = t.data;
  p.bytes = p.data_bytes = t.bytes;
  p.tensor = t.name;
  p.type = t.type;
  p.row_elems = t.ne.empty() ? 0 : t.ne[0];
  return p;
}

// Dequantized rows of piece `p` ([rows, p.row_elems]); rows whose bytes lie outside it are refused.
std::vector<float> rows_f32(const GgufPiece& p, int64_t rows, const std::string& file) {
  const auto row_bytes = quant_row_bytes(p.type, p.row_elems);
  if (!row_bytes || rows < 0 || int64_t(*row_bytes) * rows != p.bytes || p.bytes > p.data_bytes)
    throw LoadError(file + ": tensor '" + p.tensor + "': " + std::to_string(p.bytes) + " bytes do not hold " +
                    std::to_string(rows) + " rows of " + std::to_string(p.row_elems) + " " + quant_type_name(p.type));
  std::vector<float> out(size_t(rows * p.row_elems));
  try {
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row_reference(p.type, p.start + r * int64_t(*row_bytes), out.data() + r * p.row_elems, p.row_elems);
  } catch (const ArgumentError& e) {
    throw LoadError(file + ": tensor '" + p.tensor + "': " + e.what());
  }
  return out;
}

}  // namespace

std::string deepseek2_config_json(const GgufFile& f) {
  const gguf_hf::Meta m{f, "deepseek2."};
  auto fail = [&](const std::string& key, const std::string& msg) -> int64_t {
    throw LoadError(f.path() + ": key 'deepseek2." + key + "': " + msg);
  };
  const int64_t gating = m.has("expert_gating_func") ? m.i("expert_gating_func") : kSoftmax;
  if (gating != kSoftmax && gating != kSigmoid) fail("expert_gating_func", "expected 1 (softmax) or 2 (sigmoid)");
  const bool v3 = gating == kSigmoid;
  JsonObject c;
  gguf_hf::add_class(c, v3 ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM", v3 ? "deepseek_v3" : "deepseek_v2");
  const int64_t heads = m.count("attention.head_count", "num_attention_heads");
  c.add_int("hidden_size", m.positive("embedding_length"));
  c.add_int("num_hidden_layers", m.layers());
  c.add_int("num_attention_heads", heads);
  c.add_int("num_key_value_heads", heads);  // MLA: every head reads the latent (the file's 1 is llama.cpp's view)
  if (m.has("feed_forward_length")) c.add_int("intermediate_size", m.positive("feed_forward_length"));
  c.add_float("rms_norm_eps", m.has("attention.layer_norm_rms_epsilon") ? m.d("attention.layer_norm_rms_epsilon") : 1e-6);
  if (m.has("context_length")) c.add_int("max_position_embeddings", m.positive("context_length"));
  const double theta = m.has("rope.freq_base") ? m.d("rope.freq_base") : 10000.0;
  c.add_float("rope_theta", theta);

  // MLA: q LoRA only when the key is there (else a plain attn_q); the per-head widths from the _mla keys.
  if (m.has("attention.q_lora_rank")) c.add_int("q_lora_rank", m.positive("attention.q_lora_rank"));
  const int64_t rope_dim = m.positive("rope.dimension_count");
  const bool mla_keys = m.has("attention.key_length_mla");
  const int64_t qk = m.positive(mla_keys ? "attention.key_length_mla" : "attention.key_length");
  const int64_t v = m.positive(mla_keys ? "attention.value_length_mla" : "attention.value_length");
  if (qk <= rope_dim) fail(mla_keys ? "attention.key_length_mla" : "attention.key_length",
                           std::to_string(qk) + " leaves no non-rotary channels beside rope.dimension_count " +
                               std::to_string(rope_dim));
  c.add_int("kv_lora_rank", m.positive("attention.kv_lora_rank"));
  c.add_int("qk_rope_head_dim", rope_dim);
  c.add_int("qk_nope_head_dim", qk - rope_dim);
  c.add_int("v_head_dim", v);
  c.add_bool("attention_bias", gguf_hf::any_block_has(f, "attn_kv_a_mqa.bias"));
  if (v3) c.add_bool("rope_interleave", true);

  // MoE: none without expert_count (every layer dense).
  if (m.has("expert_count")) {
    c.add_int("n_routed_experts", m.count("expert_count", "num_experts"));
    c.add_int("num_experts_per_tok", m.positive("expert_used_count"));
    c.add_int("moe_intermediate_size", m.positive("expert_feed_forward_length"));
    c.add_int("n_shared_experts", m.has("expert_shared_count") ? m.i("expert_shared_count") : 0);
    c.add_int("first_k_dense_replace", m.has("leading_dense_block_count") ? m.i("leading_dense_block_count") : 0);
    c.add_float("routed_scaling_factor", m.has("expert_weights_scale") ? m.d("expert_weights_scale") : 1.0);
    c.add_bool("norm_topk_prob", m.has("expert_weights_norm") && f.get_bool("deepseek2.expert_weights_norm"));
    const int64_t groups = m.has("expert_group_count") ? m.positive("expert_group_count") : 1;
    c.add_int("n_group", groups);
    c.add_int("topk_group", m.has("expert_group_used_count") ? m.positive("expert_group_used_count") : 1);
    if (!v3) c.add_string("topk_method", groups > 1 ? "group_limited_greedy" : "greedy");
  }

  const std::string scaling = m.has("rope.scaling.type") ? f.get_string("deepseek2.rope.scaling.type") : "none";
  if (scaling == "yarn") {
    JsonObject r;
    r.add_string("type", "yarn");
    r.add_float("rope_theta", theta);
    r.add_float("factor", m.d("rope.scaling.factor"));
    r.add_int("original_max_position_embeddings", m.positive("rope.scaling.original_context_length"));
    if (m.has("rope.scaling.yarn_beta_fast")) r.add_float("beta_fast", m.d("rope.scaling.yarn_beta_fast"));
    if (m.has("rope.scaling.yarn_beta_slow")) r.add_float("beta_slow", m.d("rope.scaling.yarn_beta_slow"));
    if (m.has("rope.scaling.yarn_log_multiplier")) {
      const double mscale = m.d("rope.scaling.yarn_log_multiplier") / 0.1;
      r.add_float("mscale", mscale);
      r.add_float("mscale_all_dim", mscale);
    }
    c.add("rope_scaling", r.str());
  } else if (scaling != "none") {
    fail("rope.scaling.type", "'" + scaling + "' is not supported for deepseek2 (none, yarn)");
  }
  c.add_string("hidden_act", "silu");
  gguf_hf::add_vocab_and_dtype(c, f);
  return c.str();
}

bool add_deepseek2_kv_b(const GgufFile& f, const GgufTensor& t, int64_t layer, const std::string& base,
                        std::vector<GgufHfTensor>& out) {
  if (base != "attn_k_b" && base != "attn_v_b") return false;
  const std::string blk = "blk." + std::to_string(layer) + ".";
  if (base == "attn_v_b" || f.find_tensor(blk + "attn_kv_b.weight")) return true;
  const GgufTensor* vb = f.find_tensor(blk + "attn_v_b.weight");
  if (!vb) gguf_hf::fail(f, t.name, "its other half '" + blk + "attn_v_b.weight' is missing");
  // k_b ne [qk_nope, kv_lora_rank, heads], v_b ne [kv_lora_rank, v_head_dim, heads]
  if (t.ne.size() != 3 || vb->ne.size() != 3 || t.ne[2] != vb->ne[2] || t.ne[1] != vb->ne[0])
    gguf_hf::fail(f, t.name, "expected [heads, kv_lora_rank, qk_nope] beside '" + vb->name +
                                 "' [heads, v_head_dim, kv_lora_rank] (torch order), got shapes that disagree");
  const int64_t heads = t.ne[2], nope = t.ne[0], v = vb->ne[1], rank = t.ne[1];
  // An empty tensor takes no bytes, so the file does not bound its other sizes: the joined shape's products must
  // stay far from overflow.
  constexpr int64_t kMaxSize = int64_t(1) << 24;
  if (nope <= 0 || v <= 0 || rank <= 0 || nope > kMaxSize || v > kMaxSize || rank > kMaxSize)
    gguf_hf::fail(f, t.name, "qk_nope, v_head_dim and kv_lora_rank must be in [1, " + std::to_string(kMaxSize) + "]");
  if (heads > config_count_limit("num_attention_heads"))
    gguf_hf::fail(f, t.name, std::to_string(heads) + " heads, over the " +
                                 std::to_string(config_count_limit("num_attention_heads")) + " any model has");
  GgufHfTensor h = gguf_hf::as_stored(t, "model.layers." + std::to_string(layer) + ".self_attn.kv_b_proj.weight");
  h.shape = {heads * (nope + v), rank};
  h.type = QuantType::F32;
  h.fix = GgufFix::join_kv_b;
  h.heads = heads;
  h.pieces = {whole(t), whole(*vb)};
  out.push_back(std::move(h));
  return true;
}

GgufHfBytes join_kv_b(const GgufHfTensor& t, const std::string& file) {
  const GgufPiece& kb = t.pieces.at(0);
  const GgufPiece& vb = t.pieces.at(1);
  const int64_t heads = t.heads, rank = vb.row_elems, nope = kb.row_elems;
  const int64_t v = heads > 0 ? t.shape[0] / heads - nope : 0;
  const std::vector<float> k = rows_f32(kb, heads * rank, file);  // per head [rank, nope]
  const std::vector<float> vv = rows_f32(vb, heads * v, file);    // per head [v, rank]
  GgufHfBytes out;
  out.type = QuantType::F32;
  out.bytes.resize(size_t(heads * (nope + v) * rank) * sizeof(float));
  float* dst = reinterpret_cast<float*>(out.bytes.data());
  for (int64_t h = 0; h < heads; ++h) {
    float* head = dst + h * (nope + v) * rank;
    for (int64_t i = 0; i < nope; ++i)
      for (int64_t j = 0; j < rank; ++j) head[i * rank + j] = k[size_t((h * rank + j) * nope + i)];
    std::memcpy(head + nope * rank, vv.data() + h * v * rank, size_t(v * rank) * sizeof(float));
  }
  return out;
}

}  // namespace attnzoo
