#include "convert/gguf_export.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

#include "convert/ftype_mixture.h"
#include "convert/gguf_export_gpt_oss.h"
#include "convert/gguf_export_deepseek2.h"
#include "convert/gguf_export_dense.h"
#include "convert/gguf_export_hybrids.h"
#include "convert/gguf_export_kimi_linear.h"
#include "convert/gguf_export_pattern_hybrids.h"
#include "convert/gguf_export_qwen3_hybrid.h"
#include "convert/gguf_export_rwkv7.h"
#include "convert/gguf_export_ssm.h"
#include "convert/gguf_requantize.h"
#include "convert/gguf_export_sigmoid_moe.h"
#include "convert/tensor_plan.h"
#include "convert/tokenizer_metadata.h"
#include "core/checked.h"
#include "core/convert.h"
#include "core/error.h"
#include "kernels/quant/quantize.h"
#include "loader/gguf_checkpoint.h"
#include "loader/gguf_writer.h"
#include "loader/load_error.h"
#include "loader/model_dir.h"
#include "models/decoder.h"
#include "models/hf_config.h"

namespace attnzoo {
namespace {

// convert_hf_to_gguf.py's rope_freqs for Llama 3.1-style scaling: per-frequency divisors of theta.
std::vector<float> llama3_rope_factors(const RopeConfig& r, int64_t dim) {
  constexpr double kPi = 3.14159265358979323846;
  const double old = double(r.original_max_position_embeddings);
  std::vector<float> out;
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = float(1.0 / std::pow(r.theta, double(i) / double(dim)));
    const double wavelen = 2 * kPi / double(freq);
    if (wavelen < old / r.high_freq_factor) {
      out.push_back(1.0f);
    } else if (wavelen > old / r.low_freq_factor) {
      out.push_back(float(r.factor));
    } else {
      const double smooth = (old / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      out.push_back(float(1 / ((1 - smooth) / r.factor + smooth)));
    }
  }
  return out;
}

// `extra_blocks`: blocks past num_hidden_layers the file holds (GLM-4.5's multi-token-prediction layers).
// Mistral3Model's additions for a ministral3 text model: YaRN's betas, mscale_all_dim as yarn_log_multiplier and
// llama_4_scaling_beta as attention.temperature_scale (loader/gguf_checkpoint.cc reads them back).
void add_ministral3_yarn(GgufWriter& w, const Config& c, const RopeConfig& rope) {
  w.add_f32("mistral3.rope.scaling.yarn_beta_fast", float(rope.beta_fast));
  w.add_f32("mistral3.rope.scaling.yarn_beta_slow", float(rope.beta_slow));
  if (c.get_string_or("model_type", "") != "ministral3") return;
  const Config p = c.has("rope_parameters") ? c.sub("rope_parameters") : c.sub("rope_scaling");
  if (p.has("mscale") && p.get_float("mscale") != 1.0)
    throw LoadError(c.source() + ": key 'rope_parameters.mscale': GGUF (llama.cpp's mistral3) holds mscale_all_dim "
                    "beside an mscale of 1 only");
  w.add_f32("mistral3.rope.scaling.yarn_log_multiplier", float(rope.mscale_all_dim));
  w.add_f32("mistral3.attention.temperature_scale", float(p.get_float_or("llama_4_scaling_beta", 0.0)));
}

void add_hparams(GgufWriter& w, const Config& c, const std::string& arch, int64_t head_dim, const RopeConfig& rope,
                 std::vector<float>* rope_freqs, int64_t extra_blocks) {
  const std::string p = arch + ".";
  const int64_t heads = c.get_int("num_attention_heads");
  w.add_u32(p + "block_count", uint32_t(c.get_int("num_hidden_layers") + extra_blocks));
  if (c.has("max_position_embeddings")) w.add_u32(p + "context_length", uint32_t(c.get_int("max_position_embeddings")));
  w.add_u32(p + "embedding_length", uint32_t(c.get_int("hidden_size")));
  if (c.has("intermediate_size"))  // Qwen3.5-MoE has none
    w.add_u32(p + "feed_forward_length", uint32_t(c.get_int("intermediate_size")));
  w.add_u32(p + "attention.head_count", uint32_t(heads));
  w.add_u32(p + "attention.head_count_kv", uint32_t(c.get_int_or("num_key_value_heads", heads)));
  w.add_f32(p + "rope.freq_base", float(rope.theta));
  w.add_f32(p + "attention.layer_norm_rms_epsilon", float(c.get_float_or("rms_norm_eps", 1e-6)));
  if (c.has("head_dim") || head_dim != c.get_int("hidden_size") / heads) {
    w.add_u32(p + "attention.key_length", uint32_t(head_dim));
    w.add_u32(p + "attention.value_length", uint32_t(head_dim));
  }
  if (arch == "llama" || arch == "mistral3") {  // the converter's LlamaModel, either name
    w.add_u32(p + "rope.dimension_count", uint32_t(rope.rotary_dim ? rope.rotary_dim : head_dim));
    w.add_u32(p + "vocab_size", uint32_t(c.get_int("vocab_size")));
    if (c.has("num_local_experts")) {  // Mixtral
      w.add_u32(p + "expert_count", uint32_t(c.get_int("num_local_experts")));
      w.add_u32(p + "expert_used_count", uint32_t(c.get_int("num_experts_per_tok")));
    }
  }
  if (arch == "glm4") w.add_u32(p + "rope.dimension_count", uint32_t(rope.rotary_dim ? rope.rotary_dim : head_dim));
  if (rope.type == "linear") {
    w.add_string(p + "rope.scaling.type", "linear");
    w.add_f32(p + "rope.scaling.factor", float(rope.factor));
  } else if (rope.type == "yarn") {
    w.add_string(p + "rope.scaling.type", "yarn");
    w.add_f32(p + "rope.scaling.factor", float(rope.factor));
    w.add_u32(p + "rope.scaling.original_context_length", uint32_t(rope.original_max_position_embeddings));
    if (arch == "mistral3") add_ministral3_yarn(w, c, rope);
  } else if (rope.type == "llama3") {
    // The loader reads these back only with Llama 3's fixed companions (gguf_checkpoint.cc).
    if (arch != "llama" || rope.low_freq_factor != 1.0 || rope.high_freq_factor != 4.0 ||
        rope.original_max_position_embeddings != 8192)
      throw LoadError(c.source() + ": rope_type 'llama3' is written as GGUF only for llama with low_freq_factor 1, "
                      "high_freq_factor 4 and original_max_position_embeddings 8192");
    *rope_freqs = llama3_rope_factors(rope, rope.rotary_dim ? rope.rotary_dim : head_dim);
  } else if (rope.type == "longrope" && arch != "phi3") {
    throw LoadError(c.source() + ": rope_type 'longrope' is written as GGUF only for phi3");
  }
}

// The architectures written tensor for tensor (plan_attention); the hybrids have their own planner.
const std::set<std::string> kDirectArchs = {"llama", "qwen2", "qwen3", "gemma", "olmo2", "phi3", "smollm3", "command-r", "cohere2", "glm4",
                                            "gpt-oss", "glm4moe", "minimax-m2", "mistral3",
                                            "qwen3moe", "gemma2", "gemma3"};

// A float list of the config as F32 bytes (a GGUF tensor's data).
std::vector<uint8_t> f32_bytes(const std::vector<double>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(float));
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = float(values[i]);
    std::memcpy(out.data() + i * sizeof(float), &v, sizeof v);
  }
  return out;
}

// Phi-3's keys and LongRoPE tensors, as convert_hf_to_gguf.py's Phi3MiniModel writes them (loader/gguf_phi3.h).
void add_phi3(GgufWriter& w, const Config& c, int64_t head_dim, const RopeConfig& rope) {
  const int64_t rotary = rope.rotary_dim ? rope.rotary_dim : head_dim;
  w.add_u32("phi3.rope.dimension_count", uint32_t(rotary));
  w.add_u32("phi3.attention.sliding_window", uint32_t(c.get_int_or("sliding_window", 0)));
  if (rope.type != "longrope") return;
  w.add_u32("phi3.rope.scaling.original_context_length", uint32_t(rope.original_max_position_embeddings));
  w.add_f32("phi3.rope.scaling.attn_factor", float(rope.attention_factor));
  const Config p = c.has("rope_parameters") ? c.sub("rope_parameters") : c.sub("rope_scaling");
  for (const char* set : {"long", "short"}) {
    const std::vector<double> factors = p.get_float_list(std::string(set) + "_factor");
    if (int64_t(factors.size()) != rotary / 2)
      throw LoadError(c.source() + ": key '" + set + "_factor': expected " + std::to_string(rotary / 2) + " values");
    const std::vector<uint8_t> bytes = f32_bytes(factors);
    w.add_tensor(std::string("rope_factors_") + set + ".weight", {int64_t(factors.size())}, QuantType::F32,
                 [bytes] { return bytes; });
  }
}

// SmolLM3's GGUF has no key for its NoPE layers: llama.cpp runs every 4th layer without RoPE. Another pattern
// (or sliding windows, which it has no key for either) would be lost, so it is refused.
void check_smollm3_layout(const Config& c) {
  const int64_t layers = c.get_int("num_hidden_layers");
  bool ok = c.get_int_or("no_rope_layer_interval", 4) == 4 && !c.get_bool_or("use_sliding_window", false);
  if (c.has("no_rope_layers")) {
    const std::vector<int64_t> flags = c.get_int_list("no_rope_layers");
    ok = ok && int64_t(flags.size()) == layers;
    for (size_t i = 0; ok && i < flags.size(); ++i) ok = (flags[i] != 0) == ((i + 1) % 4 != 0);
  }
  if (!ok)
    throw LoadError(c.source() + ": keys 'no_rope_layers' / 'no_rope_layer_interval' / 'use_sliding_window': GGUF "
                    "(llama.cpp's smollm3) holds only a NoPE layer every 4th layer and no sliding window");
}

// Cohere's keys (convert_hf_to_gguf.py's CommandR2Model / Cohere2Model); llama.cpp fixes cohere2's pattern at a
// global layer every 4th, so another layer_types is refused.
void add_cohere(GgufWriter& w, const Config& c, const std::string& arch) {
  w.add_f32(arch + ".logit_scale", float(c.get_float_or("logit_scale", 0.0625)));
  w.add_f32(arch + ".attention.layer_norm_epsilon", float(c.get_float_or("layer_norm_eps", 1e-5)));
  if (arch != "cohere2") return;
  w.add_u32(arch + ".attention.sliding_window", uint32_t(c.get_int_or("sliding_window", 4096)));
  const int64_t layers = c.get_int("num_hidden_layers");
  const std::vector<std::string> types = c.has("layer_types") ? c.get_string_list("layer_types")
                                                              : std::vector<std::string>{};
  bool ok = c.get_int_or("sliding_window_pattern", 4) == 4 && (types.empty() || int64_t(types.size()) == layers);
  for (size_t i = 0; ok && i < types.size(); ++i) ok = (types[i] == "sliding_attention") == ((i + 1) % 4 != 0);
  if (!ok)
    throw LoadError(c.source() + ": key 'layer_types': GGUF (llama.cpp's cohere2) holds only a global layer every "
                    "4th layer");
}

const std::vector<float>* importance_for(const QuantizeOptions& o, const std::string& name) {
  for (const auto& [n, v] : o.importance)
    if (n == name) return &v;
  return nullptr;
}

// Each layer's experts as llama.cpp stacks them (plan_stacked_experts): from
// model.layers.<i>.block_sparse_moe.experts.<e>.w1 / w3 / w2 (Mixtral, MiniMax-M2) or
// model.layers.<i>.mlp.experts.<e>.gate_proj / up_proj / down_proj (GLM-4.5, Qwen3-MoE); `names` (any order) are all
// of them.
std::vector<TensorPlan> plan_moe_experts(const ModelFiles& files, const std::vector<std::string>& names,
                                         int64_t experts) {
  static const ExpertTensors kMixtral{"block_sparse_moe",
                                      {{"w1", "ffn_gate_exps"}, {"w3", "ffn_up_exps"}, {"w2", "ffn_down_exps"}}};
  static const ExpertTensors kMlp{
      "mlp", {{"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"}, {"down_proj", "ffn_down_exps"}}};
  const bool mixtral = names.front().find(".block_sparse_moe.experts.") != std::string::npos;
  return plan_stacked_experts(files, names, experts, mixtral ? kMixtral : kMlp);
}

// Llama / Mistral / Qwen2 / Qwen3 / Gemma ...: one GGUF tensor per Hugging Face tensor, under loader/gguf_checkpoint.h's names
// (MoE experts stacked, plan_moe_experts; routers kept in F32, as llama-quantize keeps ffn_gate_inp).
std::vector<TensorPlan> plan_attention(const ModelFiles& files, const Config& c, const GgufArchOf& arch,
                                       int64_t heads, int64_t kv_heads, bool tied) {
  std::vector<TensorPlan> plans;
  std::vector<std::string> experts;
  for (const std::string& name : files.names()) {
    if (name.find("rotary_emb.") != std::string::npos) continue;  // buffers recomputed from the config
    if (name == "lm_head.weight" && tied) continue;
    if (arch.gguf == "gpt-oss" && is_gpt_oss_expert_tensor(name)) continue;  // add_gpt_oss_experts writes them
    if (name.find(".block_sparse_moe.experts.") != std::string::npos ||
        name.find(".mlp.experts.") != std::string::npos) {
      experts.push_back(name);
      continue;
    }
    constexpr std::string_view kRouter = ".block_sparse_moe.gate.weight";  // Mixtral's, as the loader reads mlp.gate
    const std::string renamed = name.ends_with(kRouter)
                                    ? name.substr(0, name.size() - kRouter.size()) + ".mlp.gate.weight"
                                    : name;
    const bool sinks = arch.gguf == "gpt-oss" && name.ends_with(".self_attn.sinks");  // no ".weight" in the name
    const auto gguf_name = sinks ? gpt_oss_sinks_name(name) : gguf_tensor_name(arch.gguf, renamed);
    if (!gguf_name)
      throw LoadError(files.source(name) + ": tensor '" + name + "' has no GGUF counterpart for " + arch.gguf);
    TensorPlan p;
    p.gguf_name = *gguf_name;
    p.sources = {name};
    p.shape = files.stored(name).shape;
    if (gguf_name->find(".ffn_gate_inp.") != std::string::npos) p.type = QuantType::F32;
    // Llama's q_proj / k_proj rows (and biases) interleaved per head, as the converter does.
    if (arch.permuted_qk && (name.ends_with("self_attn.q_proj.weight") || name.ends_with("self_attn.q_proj.bias")))
      p.permute_heads = heads;
    if (arch.permuted_qk && (name.ends_with("self_attn.k_proj.weight") || name.ends_with("self_attn.k_proj.bias")))
      p.permute_heads = kv_heads;
    if (arch.norm_plus_one && name.ends_with("norm.weight")) p.edit = ValueEdit::plus_one;
    plans.push_back(std::move(p));
  }
  if (!experts.empty()) {
    // Mixtral's: ffn_gate_exps (w1), ffn_up_exps (w3), ffn_down_exps (w2) in every layer
    std::vector<int64_t> layers(size_t(c.get_int("num_hidden_layers")));
    for (size_t i = 0; i < layers.size(); ++i) layers[i] = int64_t(i);
    const int64_t n =
        c.get_int_or("num_local_experts", c.get_int_or("n_routed_experts", c.get_int_or("num_experts", 0)));
    std::vector<TensorPlan> stacked = plan_moe_experts(files, experts, n);
    plans.insert(plans.end(), stacked.begin(), stacked.end());
  }
  return plans;
}

void apply_edit(ValueEdit e, std::vector<float>& x) {
  if (e == ValueEdit::plus_one)
    for (float& v : x) v += 1.0f;
  if (e == ValueEdit::neg_exp)
    for (float& v : x) v = float(-std::exp(double(v)));
}

// Value-head tiling `h` must cover a [rows, cols] matrix's rows (or each row's columns) from `first` to the end:
// LoadError naming the tensor when the config's head counts say otherwise.
void check_value_heads(const ValueHeadTiling& h, int64_t rows, int64_t cols, const std::string& name) {
  if (!h.key_heads) return;
  const int64_t span = checked_mul(checked_mul(h.key_heads, h.per_key, "value heads"), h.head_size, "value heads");
  if (h.per_key <= 0 || h.head_size <= 0 || h.first < 0 || span != (h.columns ? cols : rows) - h.first)
    throw LoadError(name + ": " + std::to_string(h.key_heads * h.per_key) + " value heads of " +
                    std::to_string(h.head_size) + (h.columns ? " columns" : " rows") + " from " +
                    std::to_string(h.first) + " on do not match its " + std::to_string(rows) + " x " +
                    std::to_string(cols) + " values (linear_num_key_heads / linear_num_value_heads / "
                    "linear_*_head_dim)");
}

// Tiles the value heads of `h` in the [rows, cols] matrix `x` as llama.cpp's converter stores them.
void tile_value_heads(const ValueHeadTiling& h, std::vector<float>& x, int64_t rows, int64_t cols) {
  const int64_t f = int64_t(sizeof(float));
  move_value_heads(h, reinterpret_cast<uint8_t*>(x.data()) + (h.columns ? h.first : h.first * cols) * f,
                   h.columns ? rows : 1, h.columns ? cols * f : 0, (h.columns ? h.head_size : h.head_size * cols) * f,
                   /*to_tiled=*/true);
}

// Adds plan `p`'s tensor to `w`: its sources checked (plain floats of one shape), its type chosen, and the
// producer that converts, edits, quantizes, stacks and reorders the rows when the writer reaches it.
QuantizedTensor add_planned(GgufWriter& w, const std::shared_ptr<ModelFiles>& files, const TensorPlan& p,
                            const QuantizeOptions& o) {
  std::vector<StoredTensor> st;
  std::vector<const std::vector<float>*> imp;
  for (const std::string& name : p.sources) {
    st.push_back(files->stored(name));
    const StoredTensor& t = st.back();
    if (t.quantized() || (t.type != QuantType::F32 && t.type != QuantType::F16 && t.type != QuantType::BF16))
      throw LoadError(files->source(name) + ": tensor '" + name + "' is stored as " + quant_type_name(t.type) +
                      "; quantize reads F32 / F16 / BF16 weights");
    if (t.shape != st.front().shape || t.type != st.front().type)
      throw LoadError(files->source(name) + ": tensor '" + name + "' differs in shape or type from '" +
                      p.sources.front() + "', stacked with it into " + p.gguf_name);
  }
  const StoredTensor& first = st.front();
  // cols: the written row length; src_cols the source's (they differ when heads are transposed)
  const int64_t cols = p.shape.empty() ? 1 : p.shape.back(), numel = first.numel();
  const int64_t src_cols = p.transpose_heads && !first.shape.empty() ? first.shape.back() : cols;
  if (cols <= 0 || src_cols <= 0 || numel % src_cols != 0)
    throw LoadError(files->source(p.sources.front()) + ": tensor '" + p.sources.front() + "': " +
                    std::to_string(numel) + " values do not make rows of " + std::to_string(src_cols));
  const int64_t src_rows = numel / src_cols;
  for (int64_t r : p.rows)
    if (r < 0 || r >= src_rows || p.sources.size() != 1)
      throw LoadError(p.sources.front() + ": row " + std::to_string(r) + " of " + std::to_string(src_rows) +
                      " selected for " + p.gguf_name);
  const int64_t out_rows = p.rows.empty() ? checked_mul(src_rows, int64_t(st.size()), "stacked rows")
                                          : int64_t(p.rows.size());
  int64_t shape_numel = 1;
  for (int64_t d : p.shape) shape_numel = checked_mul(shape_numel, d, "tensor size");
  if (shape_numel != checked_mul(out_rows, src_cols, "tensor size") ||
      (p.transpose_heads && (out_rows % p.transpose_heads != 0 || p.sources.size() != 1)))
    throw LoadError(p.gguf_name + ": planned shape does not hold the rows of '" + p.sources.front() + "'");
  const int64_t written_rows = shape_numel / cols;
  check_value_heads(p.value_heads, src_rows, src_cols, files->source(p.sources.front()) + ": tensor '" +
                                                      p.sources.front() + "'");
  const int64_t perm_rows = p.shape.size() == 1 ? numel : src_rows;
  if (p.permute_heads && (perm_rows % (2 * p.permute_heads)) != 0)
    throw LoadError(files->source(p.sources.front()) + ": tensor '" + p.sources.front() + "': " +
                    std::to_string(perm_rows) + " rows do not split into " + std::to_string(p.permute_heads) +
                    " heads of even size");
  for (const std::string& name : p.sources) {
    imp.push_back(importance_for(o, name));
    if (p.transpose_heads) imp.back() = nullptr;  // its columns are no longer the source's input channels
    if (imp.back() && int64_t(imp.back()->size()) != cols)
      throw ArgumentError("importance for '" + name + "': " + std::to_string(imp.back()->size()) +
                          " values, the tensor has " + std::to_string(cols) + " input channels");
  }

  QuantizedTensor t;
  t.hf_name = p.sources.front();
  t.gguf_name = p.gguf_name;
  t.shape = p.shape;
  t.source = first.type;
  t.type = p.type ? *p.type : choose_tensor_type(o.policy, t.gguf_name, p.shape, first.type);
  const int64_t row_bytes = int64_t(*quant_row_bytes(t.type, cols));
  t.bytes = uint64_t(written_rows) * uint64_t(row_bytes);
  std::vector<int64_t> ne(p.shape.rbegin(), p.shape.rend());
  w.add_tensor(t.gguf_name, ne, t.type, [files, st, t, p, imp, src_rows, cols, src_cols, written_rows, numel,
                                         perm_rows, row_bytes] {
    if (p.transpose_heads) {  // the kept rows, each head's [n, src_cols] block as [src_cols, n]
      std::vector<float> x(static_cast<size_t>(numel)), y(static_cast<size_t>(written_rows * cols));
      convert_to_f32(st[0].data, *dtype_of(st[0].type), x.data(), size_t(numel));
      const int64_t n = int64_t(p.rows.size()) / p.transpose_heads;
      for (int64_t h = 0; h < p.transpose_heads; ++h)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < src_cols; ++j)
            y[size_t((h * src_cols + j) * n + i)] = x[size_t(p.rows[size_t(h * n + i)] * src_cols + j)];
      return quantize_matrix(t.type, y.data(), written_rows, cols, nullptr, p.sources[0]);
    }
    std::vector<uint8_t> out;
    for (size_t i = 0; i < st.size(); ++i) {
      if (t.type == st[i].type && p.edit == ValueEdit::none && !p.value_heads.key_heads && p.scales.empty()) {
        out.insert(out.end(), st[i].data, st[i].data + st[i].bytes);
        continue;
      }
      std::vector<float> x(static_cast<size_t>(numel));
      convert_to_f32(st[i].data, *dtype_of(st[i].type), x.data(), size_t(numel));
      apply_edit(p.edit, x);
      for (const TensorPlan::Scale& sc : p.scales)
        for (int64_t j = std::max<int64_t>(sc.begin, 0); j < std::min(sc.end, numel); ++j)
          x[size_t(j)] *= float(sc.factor);
      tile_value_heads(p.value_heads, x, src_rows, cols);
      const auto q = quantize_matrix(t.type, x.data(), src_rows, cols, imp[i] ? imp[i]->data() : nullptr,
                                     p.sources[i]);
      out.insert(out.end(), q.begin(), q.end());
    }
    if (!p.rows.empty()) {  // rows are whole blocks: a quantized row moves as bytes
      std::vector<uint8_t> kept(p.rows.size() * size_t(row_bytes));
      for (size_t r = 0; r < p.rows.size(); ++r)
        std::memcpy(kept.data() + r * size_t(row_bytes), out.data() + p.rows[r] * row_bytes, size_t(row_bytes));
      out.swap(kept);
    }
    if (p.permute_heads) {
      std::vector<uint8_t> permuted(out.size());
      permute_rope_rows(out.data(), permuted.data(), perm_rows, int64_t(out.size()) / perm_rows, p.permute_heads);
      out.swap(permuted);
    }
    return out;
  });
  return t;
}

}  // namespace

void refuse_output_over_source(const std::string& src, const std::string& out_path) {
  namespace fs = std::filesystem;
  std::error_code ec, src_ec, out_ec;
  if (!fs::exists(out_path, ec)) return;
  if (fs::is_directory(out_path, ec))
    throw ArgumentError("out (-o): '" + out_path + "' is a directory; name the .gguf file to write");
  if (fs::is_regular_file(src, ec)) {  // a GGUF requantized
    if (fs::equivalent(src, out_path, ec)) throw ArgumentError("out (-o): '" + out_path + "' is the source file itself");
    return;
  }
  // The finished file is renamed over -o: were -o a file of the checkpoint (or, through a symlink in it, the blob a
  // Hugging Face cache's file points at), the checkpoint would be gone after a successful run.
  const fs::path dir = fs::canonical(src, src_ec), out = fs::canonical(out_path, out_ec);
  bool inside = !src_ec && !out_ec && std::mismatch(dir.begin(), dir.end(), out.begin(), out.end()).first == dir.end();
  for (const fs::directory_entry& e : fs::directory_iterator(src, ec))
    inside = inside || fs::equivalent(e.path(), out_path, ec);
  if (inside)
    throw ArgumentError("out (-o): '" + out_path + "' is a file of the source checkpoint '" + src +
                        "' (choose a path outside it)");
}

QuantizeSummary quantize_checkpoint(const std::string& src_dir, const std::string& out_path, const QuantizeOptions& o) {
  refuse_output_over_source(src_dir, out_path);
  if (std::filesystem::is_regular_file(src_dir)) return requantize_gguf(src_dir, out_path, o);
  if (!std::filesystem::is_directory(src_dir))
    throw ArgumentError("src_dir (-m): '" + src_dir + "' is not a directory (expected a Hugging Face checkpoint "
                        "directory or a GGUF file)");
  if (find_model_gguf(src_dir))
    throw ArgumentError("src_dir (-m): '" + src_dir + "' holds a GGUF checkpoint; quantize reads Hugging Face safetensors");
  auto files = std::make_shared<ModelFiles>(ModelFiles::open(src_dir));
  const Config& root = files->config();
  const std::vector<std::string> archs =
      root.has("architectures") ? root.get_string_list("architectures") : std::vector<std::string>{};
  const std::string hf_class = archs.empty() ? "" : archs[0];
  const std::optional<Qwen3Hybrid> hybrid = qwen3_hybrid_for_hf(hf_class);
  const std::optional<std::string> pattern = pattern_hybrid_arch(root);
  const std::string text_class = wrapper_text_class(root, hf_class);
  const auto arch = gguf_arch_for_hf(text_class);
  const bool deepseek2 = arch && arch->gguf == "deepseek2";
  const std::optional<std::string> conv_hybrid = conv_hybrid_arch_for_hf(hf_class);
  const std::optional<std::string> ssm = ssm_arch_for_hf(hf_class);
  const bool rwkv7 = hf_class == "RWKV7ForCausalLM", kimi = hf_class == "KimiLinearForCausalLM";
  if (hf_class == "MiniMaxForCausalLM")
    throw LoadError(root.source() + ": architecture 'MiniMaxForCausalLM' (MiniMax-Text-01 / M1) cannot be quantized "
                    "to GGUF: llama.cpp has no architecture for its lightning attention, so no GGUF file could "
                    "hold it");
  if (!hybrid && !pattern && !deepseek2 && !conv_hybrid && !ssm && !rwkv7 && !kimi &&
      (!arch || !kDirectArchs.count(arch->gguf)))
    throw LoadError(root.source() + ": architecture '" + hf_class +
                    "' cannot be quantized to GGUF yet (supported: LlamaForCausalLM, Qwen2ForCausalLM, "
                    "Qwen3ForCausalLM, GemmaForCausalLM, MistralForCausalLM, Qwen3MoeForCausalLM, Gemma2ForCausalLM, "
                    "Gemma3ForCausalLM, Olmo2ForCausalLM, Phi3ForCausalLM, SmolLM3ForCausalLM, "
                    "MixtralForCausalLM, CohereForCausalLM, Cohere2ForCausalLM, Glm4ForCausalLM, GptOssForCausalLM, "
                    "Glm4MoeForCausalLM, MiniMaxM2ForCausalLM, Ministral3ForCausalLM, "
                    "Mistral3ForConditionalGeneration, Gemma3ForConditionalGeneration, "
                    "LlavaForConditionalGeneration, "
                    "DeepseekV2ForCausalLM, DeepseekV3ForCausalLM, "
                    "Qwen3NextForCausalLM, Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM, "
                    "Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration, Lfm2ForCausalLM, "
                    "Lfm2MoeForCausalLM, JambaForCausalLM, NemotronHForCausalLM, GraniteMoeHybridForCausalLM, "
                    "BambaForCausalLM, MambaForCausalLM, FalconMambaForCausalLM, Mamba2ForCausalLM, "
                    "FalconH1ForCausalLM, RWKV7ForCausalLM, KimiLinearForCausalLM)");
  const bool wrapper = hf_class.ends_with("ForConditionalGeneration");
  if (wrapper && !root.has_text_config()) throw LoadError(root.source() + ": " + hf_class + " needs a text_config");
  const Config c = root.text_config();
  const std::string gguf_arch = hybrid        ? qwen3_hybrid_arch(*hybrid)
                                : pattern     ? *pattern
                                : conv_hybrid ? *conv_hybrid
                                : ssm         ? *ssm
                                : rwkv7       ? std::string("rwkv7")
                                : kimi        ? std::string("kimi-linear")
                                              : arch->gguf;

  QuantizeSummary summary;
  summary.architecture = gguf_arch;
  summary.set_aside = files->set_aside().size();
  // Mamba, Mamba-2 and RWKV-7 have no attention: 1 stands in for the head counts the other families check
  const bool attention_free = (ssm && *ssm != "falcon-h1") || rwkv7;
  const int64_t heads = attention_free ? 1 : c.get_int("num_attention_heads");
  const int64_t kv_heads = c.get_int_or("num_key_value_heads", heads);
  if (heads <= 0 || kv_heads <= 0)
    throw LoadError(c.source() + ": key 'num_attention_heads' / 'num_key_value_heads': must be positive");
  const int64_t head_dim = c.get_int_or("head_dim", c.get_int("hidden_size") / heads);
  const RopeConfig rope = export_rope(c, gguf_arch, head_dim);
  // transformers' MambaConfig ties by default, fla's RWKV7Config does not; Kimi Linear never does (transformers
  // ignores its tie_word_embeddings)
  const bool tied = !kimi && config_ties_embeddings(root, c, attention_free && !rwkv7);

  // llama.cpp's 32-byte alignment, and so no general.alignment key: llama-quantize copies that key into its output
  // but pads the output to 32 regardless, so from a file of 64 it wrote files that llama.cpp, gguf-py and our loader
  // refuse (the last tensor runs past the end). The 64 bought only in-place AMX reads of bf16 rows; a bf16 matrix off
  // a line is copied aligned once at load instead (layers/linear.cc), as a safetensors checkpoint's are.
  GgufWriter w(32);
  w.add_string("general.architecture", gguf_arch);
  w.add_string("general.type", "model");
  std::filesystem::path dir_name = std::filesystem::path(src_dir).lexically_normal();
  if (dir_name.filename().empty()) dir_name = dir_name.parent_path();  // "models/x/" -> "models/x"
  w.add_string("general.name", dir_name.filename().string());
  w.add_u32("general.file_type", llama_file_type(o.policy));
  std::vector<float> rope_freqs;
  const int64_t mtp_blocks = gguf_arch == "glm4moe" ? count_mtp_blocks(*files, c) : 0;
  if (deepseek2)
    add_deepseek2_hparams(w, c);
  else if (conv_hybrid)
    add_conv_hybrid_hparams(w, *files, c, gguf_arch);
  else if (pattern)
    add_pattern_hybrid_hparams(w, root, gguf_arch);
  else if (ssm)
    add_ssm_hparams(w, c, hf_class, gguf_arch);
  else if (rwkv7)
    add_rwkv7_hparams(w, *files, c);
  else if (kimi)
    add_kimi_linear_hparams(w, c);
  else
    add_hparams(w, c, gguf_arch, head_dim, rope, &rope_freqs, mtp_blocks);
  add_sigmoid_moe_hparams(w, c, gguf_arch, rope.rotary_dim ? rope.rotary_dim : head_dim, mtp_blocks);
  if (hybrid) add_qwen3_hybrid_hparams(w, c, rope.rotary_dim ? rope.rotary_dim : head_dim, *hybrid);
  // What llama.cpp's form cannot hold follows the language model: a Mistral 3 wrapper's Mistral has no window either
  const std::string family_class =
      wrapper && c.get_string_or("model_type", "") == "mistral" ? "MistralForCausalLM" : text_class;
  add_dense_family_hparams(w, c, family_class, gguf_arch);
  if (gguf_arch == "phi3") add_phi3(w, c, head_dim, rope);
  if (gguf_arch == "smollm3") check_smollm3_layout(c);
  if (gguf_arch == "command-r" || gguf_arch == "cohere2") add_cohere(w, c, gguf_arch);
  if (gguf_arch == "gpt-oss") add_gpt_oss_hparams(w, c);
  const std::string embed = rwkv7 ? "model.embeddings.weight" : attention_free ? "backbone.embeddings.weight"
                                                                              : "model.embed_tokens.weight";
  const int64_t vocab = files->has(embed) ? files->stored(embed).shape.at(0) : c.get_int("vocab_size");
  summary.tokenizer = add_tokenizer_metadata(w, src_dir, vocab);

  if (!rope_freqs.empty()) {
    const std::vector<float> factors = rope_freqs;
    w.add_tensor("rope_freqs.weight", {int64_t(factors.size())}, QuantType::F32, [factors] {
      std::vector<uint8_t> b(factors.size() * 4);
      std::memcpy(b.data(), factors.data(), b.size());
      return b;
    });
  }
  const std::vector<TensorPlan> plans = hybrid        ? plan_qwen3_hybrid(*files, *hybrid)
                                        : deepseek2   ? plan_deepseek2(*files, c, tied)
                                        : conv_hybrid ? plan_conv_hybrid(*files, c, gguf_arch, tied)
                                        : pattern     ? plan_pattern_hybrid(*files, gguf_arch)
                                        : ssm         ? plan_ssm(*files, c, gguf_arch, tied)
                                        : rwkv7       ? plan_rwkv7(*files, tied)
                                        : kimi        ? plan_kimi_linear(*files, c)
                                                      : plan_attention(*files, c, *arch, heads, kv_heads, tied);
  // The file type's rules are settled over the whole file first (they count tensors, and read the expert count and
  // whether the head is tied): gpt-oss's experts, written by add_gpt_oss_experts, are named here too
  QuantizeOptions resolved = o;
  {
    std::vector<MixtureTensor> names;
    for (const TensorPlan& p : plans) names.push_back({p.gguf_name, p.shape, !p.type});
    if (gguf_arch == "gpt-oss")
      for (int64_t i = 0; i < c.get_int("num_hidden_layers"); ++i)
        for (const char* e : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"})
          names.push_back({"blk." + std::to_string(i) + "." + e + ".weight", {}, true});
    const MixtureModel model = mixture_model(
        gguf_arch, [&w](const std::string& key) { return w.first_int(key); }, !o.importance.empty());
    resolved.policy.mixture_types = resolve_mixture(o.policy, model, names);
  }
  bool any_quantized = false;
  std::set<std::string> read;
  for (const TensorPlan& p : plans) {
    summary.tensors.push_back(add_planned(w, files, p, resolved));
    const QuantizedTensor& t = summary.tensors.back();
    any_quantized = any_quantized || quant_type_info(uint32_t(t.type))->block_elems > 1;
    summary.bytes_out += t.bytes;
    for (const std::string& s : p.sources)
      if (read.insert(s).second) summary.bytes_in += uint64_t(files->stored(s).bytes);
  }
  if (gguf_arch == "gpt-oss")
    for (QuantizedTensor& t : add_gpt_oss_experts(w, files, c, resolved, &summary.bytes_in)) {
      any_quantized = any_quantized || quant_type_info(uint32_t(t.type))->block_elems > 1;
      summary.bytes_out += t.bytes;
      summary.tensors.push_back(std::move(t));
    }
  if (any_quantized) w.add_u32("general.quantization_version", 2);
  w.write(out_path);
  return summary;
}

}  // namespace attnzoo
