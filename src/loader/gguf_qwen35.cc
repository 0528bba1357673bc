#include "loader/gguf_qwen35.h"

#include <cstring>

#include "core/quant_type.h"
#include "loader/load_error.h"

namespace attnzoo {

using gguf_hf::fail;
using gguf_hf::JsonObject;
using gguf_hf::Meta;
using gguf_hf::sized;

namespace {

// The linear-attention head counts and sizes, each within its config key's bound, and consistent.
struct LinearHeads {
  int64_t nk, nv, dk, dv;
};

LinearHeads linear_heads(const Meta& m) {
  LinearHeads h;
  h.nk = m.count("ssm.group_count", "linear_num_key_heads");
  h.nv = m.count("ssm.time_step_rank", "linear_num_value_heads");
  h.dk = m.count("ssm.state_size", "linear_key_head_dim");
  if (h.nv % h.nk != 0)
    throw LoadError(m.f.path() + ": key '" + m.p + "ssm.time_step_rank' (" + std::to_string(h.nv) +
                    " value heads) is not a multiple of '" + m.p + "ssm.group_count' (" + std::to_string(h.nk) +
                    " key heads)");
  h.dv = m.ratio(m.positive("ssm.inner_size"), "ssm.inner_size", h.nv, "ssm.time_step_rank");
  if (h.dv > config_count_limit("linear_value_head_dim"))
    throw LoadError(m.f.path() + ": key '" + m.p + "ssm.inner_size': value heads of " + std::to_string(h.dv) +
                    ", over the " + std::to_string(config_count_limit("linear_value_head_dim")) + " any model has");
  return h;
}

}  // namespace

int64_t qwen35_text_layers(const Meta& m) {
  const int64_t blocks = m.layers();
  const int64_t mtp = m.has("nextn_predict_layers") ? m.i("nextn_predict_layers") : 0;
  if (mtp < 0 || mtp >= blocks)
    throw LoadError(m.f.path() + ": key '" + m.p + "nextn_predict_layers': " + std::to_string(mtp) +
                    " prediction blocks of the " + std::to_string(blocks) + " in '" + m.p + "block_count'");
  return blocks - mtp;
}

void qwen3_hybrid_config(JsonObject& c, const Meta& m, Qwen3Hybrid v) {
  if (v == Qwen3Hybrid::next)
    gguf_hf::add_class(c, "Qwen3NextForCausalLM", "qwen3_next");
  else if (v == Qwen3Hybrid::dense35)
    gguf_hf::add_class(c, "Qwen3_5ForCausalLM", "qwen3_5_text");
  else
    gguf_hf::add_class(c, "Qwen3_5MoeForCausalLM", "qwen3_5_moe_text");
  const int64_t layers = v == Qwen3Hybrid::next ? m.layers() : qwen35_text_layers(m);
  const int64_t heads = m.count("attention.head_count", "num_attention_heads");
  const int64_t head_dim = m.has("attention.key_length") ? m.positive("attention.key_length")
                                                         : m.positive("embedding_length") / heads;
  c.add_int("hidden_size", m.positive("embedding_length"));
  c.add_int("num_hidden_layers", layers);
  c.add_int("num_attention_heads", heads);
  c.add_int("num_key_value_heads",
            m.has("attention.head_count_kv") ? m.count("attention.head_count_kv", "num_key_value_heads") : heads);
  c.add_int("head_dim", head_dim);
  // Qwen3.5's interleaved multimodal RoPE (rope.dimension_sections) turns every frequency by the same position
  // for text: the partial RoPE below.
  const int64_t rope_dim = m.has("rope.dimension_count") ? m.positive("rope.dimension_count") : head_dim / 4;
  c.add_float("partial_rotary_factor", double(rope_dim) / double(head_dim));
  c.add_float("rope_theta", m.has("rope.freq_base") ? m.d("rope.freq_base") : 10000.0);
  if (m.has("context_length")) c.add_int("max_position_embeddings", m.i("context_length"));
  c.add_float("rms_norm_eps", m.eps());
  const LinearHeads lh = linear_heads(m);
  c.add_int("linear_conv_kernel_dim", m.count("ssm.conv_kernel", "conv_kernel"));
  c.add_int("linear_key_head_dim", lh.dk);
  c.add_int("linear_num_key_heads", lh.nk);
  c.add_int("linear_num_value_heads", lh.nv);
  c.add_int("linear_value_head_dim", lh.dv);
  c.add_int("full_attention_interval", m.has("full_attention_interval") ? m.positive("full_attention_interval") : 4);
  c.add_string("hidden_act", "silu");
  if (v == Qwen3Hybrid::dense35) {
    c.add_int("intermediate_size", m.positive("feed_forward_length"));
    return;
  }
  if (m.has("feed_forward_length")) c.add_int("intermediate_size", m.i("feed_forward_length"));
  c.add_int("num_experts", m.count("expert_count", "num_experts"));
  c.add_int("num_experts_per_tok", m.count("expert_used_count", "num_experts_per_tok"));
  c.add_int("moe_intermediate_size", m.positive("expert_feed_forward_length"));
  c.add_int("shared_expert_intermediate_size", m.positive("expert_shared_feed_forward_length"));
  c.add_bool("norm_topk_prob", true);  // llama.cpp's graphs (and Qwen3.5-MoE's router) renormalize the top-k weights
  c.add_int("decoder_sparse_step", 1);
  // A block without a router is a dense MLP.
  std::string dense = "[";
  for (int64_t i = 0; i < layers; ++i)
    if (!m.f.find_tensor("blk." + std::to_string(i) + ".ffn_gate_inp.weight"))
      dense += std::string(dense.size() > 1 ? ", " : "") + std::to_string(i);
  c.add("mlp_only_layers", dense + "]");
}

// Qwen3-Next's linear-attention input projection: Hugging Face interleaves it per key head ([q, k, v, z] for
// each of the nk heads; v and z hold nv / nk value heads each), the converter splits it into attn_qkv
// ([all q; all k; all v]) and attn_gate ([all z]). The two stay apart, borrowed from the mapping in their own
// types, as Qwen3.5's in_proj_qkv / in_proj_z, which the DeltaNet layer reads beside in_proj_ba: gathering them
// back into one in_proj_qkvz copied those weights (1.26 GB resident instead of 0.95 GB for the Q8_0 bench model)
// for no measurable speed: that model's prefill (301 and 1201 tokens) and decode, alternated, differ within their
// noise. (The projection alone, Q8_0 on 2 threads: 1.0-1.08x the gathered time at 1, 301 and 1024 tokens, 1.2-1.35x
// at 64.) The head counts and sizes come from the metadata: the shapes are checked against them here.
std::vector<GgufHfTensor> qwen3next_in_proj(const GgufFile& f, const GgufTensor& qkv, const std::string& layer) {
  const Meta m{f, "qwen3next."};
  const std::string gate_name = qkv.name.substr(0, qkv.name.size() - std::string("attn_qkv.weight").size()) +
                                "attn_gate.weight";
  const GgufTensor* gate = f.find_tensor(gate_name);
  if (!gate) fail(f, qkv.name, "comes without '" + gate_name + "', the z part of in_proj_qkvz");
  const LinearHeads lh = linear_heads(m);
  const int64_t nk = lh.nk, dk = lh.dk, inner = lh.nv * lh.dv;
  const int64_t qk_rows = sized(f, qkv.name, [&] { return checked_mul(checked_mul(2, nk, "q and k"), dk, "q and k"); });
  const int64_t rows = sized(f, qkv.name, [&] { return checked_add(qk_rows, inner, "q, k and v"); });
  if (qkv.ne.size() != 2 || gate->ne.size() != 2 || qkv.ne[0] != gate->ne[0] || qkv.ne[1] != rows ||
      gate->ne[1] != inner)
    fail(f, qkv.name, "expected [" + std::to_string(rows) + ", hidden] beside '" + gate_name + "' [" +
                          std::to_string(inner) + ", hidden]");
  return {gguf_hf::as_stored(qkv, layer + "linear_attn.in_proj_qkv.weight"),
          gguf_hf::as_stored(*gate, layer + "linear_attn.in_proj_z.weight")};
}

void mark_value_heads(const GgufFile& f, const GgufTensor& t, const std::string& base, GgufHfTensor& h) {
  const bool qkv_like = base == "attn_qkv" || base == "ssm_conv1d";
  const bool per_head = base == "ssm_beta" || base == "ssm_alpha" || base == "ssm_a" || base == "ssm_dt";
  const bool columns = base == "ssm_out";
  if (!qkv_like && !per_head && !columns && base != "attn_gate") return;
  const Meta m{f, f.get_string("general.architecture") + "."};
  const LinearHeads lh = linear_heads(m);
  if (lh.nk == lh.nv) return;  // the converter tiles only when value heads outnumber key heads
  ValueHeadTiling v;
  v.key_heads = lh.nk;
  v.per_key = lh.nv / lh.nk;
  v.head_size = per_head ? 1 : lh.dv;
  v.first = qkv_like ? 2 * lh.nk * lh.dk : 0;  // at most 2 * 4096 * 65536: no overflow
  v.columns = columns;
  const int64_t want = v.first + lh.nv * v.head_size;  // nv * dv is ssm.inner_size, at most 2^32
  const auto info = quant_type_info(uint32_t(h.type));
  const std::string counts = "'" + m.p + "ssm.group_count' " + std::to_string(lh.nk) + ", '" + m.p +
                             "ssm.time_step_rank' " + std::to_string(lh.nv) + ", '" + m.p + "ssm.state_size' " +
                             std::to_string(lh.dk) + ", '" + m.p + "ssm.inner_size' " + std::to_string(lh.nv * lh.dv);
  if (columns) {
    if (h.shape.size() != 2 || h.shape[1] != want)
      fail(f, t.name, "expected " + std::to_string(want) + " input columns (" + counts + ")");
    if (!info || lh.dv % info->block_elems != 0)
      fail(f, t.name, std::string("value heads of ") + std::to_string(lh.dv) + " columns do not hold whole " +
                          quant_type_name(h.type) + " blocks, so they cannot be moved back");
  } else {
    if (h.shape.empty() || h.shape[0] != want)
      fail(f, t.name, "expected " + std::to_string(want) + " rows (" + counts + ")");
    if (h.shape.size() == 1 && (!info || info->block_elems != 1))
      fail(f, t.name, std::string("a 1-D tensor stored as ") + quant_type_name(h.type) +
                          " cannot have its value heads moved back element by element");
  }
  if (h.fix == GgufFix::none) h.fix = GgufFix::untile_value_heads;
  h.value_heads = v;
}

void untile_value_heads(const GgufHfTensor& t, GgufHfBytes& out, const std::string& file) {
  const ValueHeadTiling& v = t.value_heads;
  auto bad = [&](const std::string& why) {
    throw LoadError(file + ": tensor '" + t.gguf_name + "': value heads of '" + t.hf_name + "' " + why);
  };
  const auto info = quant_type_info(uint32_t(out.type));
  const int64_t total = int64_t(out.bytes.size());
  if (!info || t.shape.empty() || t.shape[0] <= 0 || total <= 0 || total % t.shape[0] != 0 || v.per_key <= 0 ||
      v.key_heads <= 0 || v.head_size <= 0 || v.first < 0 || (v.columns && v.head_size % info->block_elems != 0))
    bad("do not fit its shape");
  const int64_t row_bytes = total / t.shape[0];
  int64_t chunk = 0, span = 0, start = 0;
  try {
    chunk = v.columns ? checked_mul(v.head_size / info->block_elems, info->block_bytes, "value head")
                      : checked_mul(v.head_size, row_bytes, "value head");
    span = checked_mul(checked_mul(v.key_heads, v.per_key, "value heads"), chunk, "value heads");
    start = v.columns ? 0 : checked_mul(v.first, row_bytes, "value heads");
  } catch (const ArgumentError&) {
    bad("overflow");
  }
  if (span > (v.columns ? row_bytes : total) - start) bad("lie outside its " + std::to_string(total) + " bytes");
  move_value_heads(v, out.bytes.data() + start, v.columns ? t.shape[0] : 1, v.columns ? row_bytes : 0, chunk,
                   /*to_tiled=*/false);
}

}  // namespace attnzoo
