#pragma once
// Pieces the GGUF-as-checkpoint readers share (gguf_checkpoint.cc and the per-family files beside it).
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/checked.h"
#include "loader/config_limits.h"
#include "loader/gguf.h"
#include "loader/gguf_checkpoint.h"
#include "core/dtype.h"
#include "core/quant_type.h"
#include "loader/json.h"
#include "loader/json_writer.h"
#include "loader/load_error.h"

namespace attnzoo::gguf_hf {

// config.json built key by key on json::Writer (floats stay floats: rope_theta 10000.0); nested values (lists,
// rope_scaling) come as JSON text.
class JsonObject {
 public:
  JsonObject() { w_.begin_object(); }
  void add(const std::string& key, const std::string& encoded) { w_.key(key).value(json::parse(encoded)); }
  void add_int(const std::string& key, int64_t v) { w_.member(key, v); }
  void add_float(const std::string& key, double v) { w_.member(key, v); }
  void add_string(const std::string& key, const std::string& v) { w_.member(key, v); }
  void add_bool(const std::string& key, bool v) { w_.member(key, v); }
  std::string str() { return w_.end_object().take(); }  // once, when complete

 private:
  json::Writer w_;
};

// config.json's architectures ([hf_class]) and model_type.
inline void add_class(JsonObject& c, const char* hf_class, const char* model_type) {
  std::string list = "[";  // appended piecewise: g++ 12 misreads "[" + std::string as an overlapping copy
  list += json::quote(hf_class);
  list += "]";
  c.add("architectures", list);
  c.add_string("model_type", model_type);
}

[[noreturn]] inline void fail(const GgufFile& f, const std::string& tensor, const std::string& m) {
  throw LoadError(f.path() + ": tensor '" + tensor + "': " + m);
}

// The types a converter edit (A = -exp(A_log), a folded +1) can be undone on.
inline bool plain_float(QuantType t) { return t == QuantType::F32 || t == QuantType::F16 || t == QuantType::BF16; }

// fn() with checked_mul / checked_add's overflow turned into a LoadError naming the file and `tensor`.
template <typename Fn>
auto sized(const GgufFile& f, const std::string& tensor, Fn&& fn) {
  try {
    return fn();
  } catch (const LoadError&) {
    throw;
  } catch (const ArgumentError& e) {
    fail(f, tensor, e.what());
  }
}

inline const char* dtype_name_of(QuantType t) {
  const std::optional<DType> dt = dtype_of(t);  // quantized and f32 checkpoints compute in f32
  return dt && (*dt == DType::f16 || *dt == DType::bf16) ? dtype_name(*dt) : "float32";
}

// "blk.N.rest" -> (N, rest); nullopt for other names.
inline std::optional<std::pair<int64_t, std::string>> split_block(const std::string& name) {
  if (!name.starts_with("blk.")) return std::nullopt;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4) return std::nullopt;
  int64_t n = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9' || n > 1000000) return std::nullopt;
    n = n * 10 + (name[i] - '0');
  }
  return std::make_pair(n, name.substr(dot + 1));
}

// "model.layers.N.rest" -> (N as written, rest) when N is a plain decimal layer index; nullopt for other names.
inline std::optional<std::pair<std::string, std::string>> split_hf_layer(const std::string& name) {
  constexpr std::string_view kLayers = "model.layers.";
  if (!name.starts_with(kLayers)) return std::nullopt;
  const size_t dot = name.find('.', kLayers.size());
  if (dot == std::string::npos) return std::nullopt;
  std::string layer = name.substr(kLayers.size(), dot - kLayers.size());
  if (!split_block("blk." + layer + ".x")) return std::nullopt;
  return std::make_pair(std::move(layer), name.substr(dot + 1));
}

inline std::vector<int64_t> torch_shape(const GgufTensor& t) { return std::vector<int64_t>(t.ne.rbegin(), t.ne.rend()); }

// Whether some block holds `rest` (e.g. "ssm_conv1d.bias"): the converter writes a bias only when the model has one.
inline bool any_block_has(const GgufFile& f, const std::string& rest) {
  for (const GgufTensor& t : f.tensors())
    if (auto b = gguf_hf::split_block(t.name); b && b->second == rest) return true;
  return false;
}

struct Meta {
  const GgufFile& f;
  std::string p;  // "<arch>."
  bool has(const std::string& k) const { return f.has(p + k); }
  int64_t i(const std::string& k) const { return f.get_int(p + k); }
  double d(const std::string& k) const { return f.get_float(p + k); }
  // Sizes and counts: positive and at most 2^32 (no model comes near; products of two stay far from overflow).
  int64_t positive(const std::string& k) const { return bounded(k, int64_t(1) << 32); }
  int64_t bounded(const std::string& k, int64_t max) const {
    const int64_t v = i(k);
    if (v <= 0 || v > max)
      throw LoadError(f.path() + ": key '" + p + k + "': must be in [1, " + std::to_string(max) + "], got " +
                      std::to_string(v));
    return v;
  }
  // A count bounded like the config.json key it becomes (config_limits.h).
  int64_t count(const std::string& k, std::string_view hf_key) const { return bounded(k, config_count_limit(hf_key)); }
  // block_count: within num_hidden_layers' bound and at most the tensor count (every block holds a tensor), so
  // loops over the layers stay as short as the file.
  int64_t layers() const {
    const int64_t n = count("block_count", "num_hidden_layers");
    if (n > int64_t(f.tensors().size()))
      throw LoadError(f.path() + ": key '" + p + "block_count': " + std::to_string(n) + " blocks, but the file holds " +
                      std::to_string(f.tensors().size()) + " tensors");
    return n;
  }
  // a / b where b must divide a (keys named for the error).
  int64_t ratio(int64_t a, const std::string& ka, int64_t b, const std::string& kb) const {
    if (b <= 0 || a % b != 0)
      throw LoadError(f.path() + ": key '" + p + ka + "' (" + std::to_string(a) + ") is not a multiple of '" + p + kb +
                      "' (" + std::to_string(b) + ")");
    return a / b;
  }
  double eps() const { return has("attention.layer_norm_rms_epsilon") ? d("attention.layer_norm_rms_epsilon") : 1e-5; }
};

// head_count_kv: one count per layer, 0 for a layer without attention (a single count, or none: every layer
// attends). LoadError naming the key when the attention layers' counts differ or pass num_key_value_heads' bound.
struct AttentionLayers {
  std::vector<bool> attends;
  int64_t kv_heads = 0;  // the attention layers' count (`heads` when none attends)
};
AttentionLayers attention_layers(const Meta& m, int64_t layers, int64_t heads);

// llama.cpp rotates rope.dimension_count channels of each head (all of it when the file names none), whatever the
// architecture. The config states that share as partial_rotary_factor where the architecture reads one
// (loader/rotary_share.h); a file asking another share of an architecture that cannot state it is refused (LoadError
// naming the key).
void add_rotary_share(JsonObject& c, const Meta& m, const std::string& model_type, int64_t head_dim);

// vocab_size, tie_word_embeddings, the bos / eos / pad ids and torch_dtype: the weights decide vocab_size and
// tying (transformers' config must agree with them to load at all).
void add_vocab_and_dtype(JsonObject& c, const GgufFile& f);

// The Hugging Face names of an expert's gate / up / down projections (LFM2-MoE: w1 / w3 / w2).
struct ExpertProjNames {
  const char* gate = "gate_proj";
  const char* up = "up_proj";
  const char* down = "down_proj";
};

// A MoE block's stacked experts ([n_expert, rows, cols] in torch order: each expert a contiguous slice, quantized
// or not) exposed as `prefix`E.{gate,up,down}_proj.weight (or `names`); ffn_gate_up_exps (gate rows, then up rows
// per expert) as both halves. False when `base` is not ffn_{gate,up,down,gate_up}_exps.
bool add_expert_slices(const GgufFile& f, const GgufTensor& t, const std::string& prefix, const std::string& base,
                       std::vector<GgufHfTensor>& out, const ExpertProjNames& names = {});

// A stack of `experts` in tensor `t` (blk.N.*): LoadError naming the tensor unless there are as many as the
// architecture's expert_count (1 without the key), none of empty rows (`empty_rows`), in a block below block_count.
void check_expert_stack(const GgufFile& f, const GgufTensor& t, int64_t experts, bool empty_rows);

// Sorted by Hugging Face name; two GGUF tensors mapping to one name are refused (LoadError naming both).
std::vector<GgufHfTensor> sorted_unique(const GgufFile& f, std::vector<GgufHfTensor> out);

// The GgufHfTensor for `t` as it is stored (no fix), under `hf_name`.
GgufHfTensor as_stored(const GgufTensor& t, std::string hf_name);

}  // namespace attnzoo::gguf_hf
