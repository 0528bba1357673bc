#include "convert/gguf_export.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>

#include "convert/tokenizer_metadata.h"
#include "core/convert.h"
#include "core/error.h"
#include "kernels/quant/quantize.h"
#include "loader/gguf_checkpoint.h"
#include "loader/gguf_writer.h"
#include "loader/load_error.h"
#include "loader/model_dir.h"
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

void add_hparams(GgufWriter& w, const Config& c, const std::string& arch, int64_t head_dim, const RopeConfig& rope,
                 std::vector<float>* rope_freqs) {
  const std::string p = arch + ".";
  const int64_t heads = c.get_int("num_attention_heads");
  w.add_u32(p + "block_count", uint32_t(c.get_int("num_hidden_layers")));
  if (c.has("max_position_embeddings")) w.add_u32(p + "context_length", uint32_t(c.get_int("max_position_embeddings")));
  w.add_u32(p + "embedding_length", uint32_t(c.get_int("hidden_size")));
  w.add_u32(p + "feed_forward_length", uint32_t(c.get_int("intermediate_size")));
  w.add_u32(p + "attention.head_count", uint32_t(heads));
  w.add_u32(p + "attention.head_count_kv", uint32_t(c.get_int_or("num_key_value_heads", heads)));
  w.add_f32(p + "rope.freq_base", float(rope.theta));
  w.add_f32(p + "attention.layer_norm_rms_epsilon", float(c.get_float_or("rms_norm_eps", 1e-6)));
  if (c.has("head_dim") || head_dim != c.get_int("hidden_size") / heads) {
    w.add_u32(p + "attention.key_length", uint32_t(head_dim));
    w.add_u32(p + "attention.value_length", uint32_t(head_dim));
  }
  if (arch == "llama") {
    w.add_u32(p + "rope.dimension_count", uint32_t(rope.rotary_dim ? rope.rotary_dim : head_dim));
    w.add_u32(p + "vocab_size", uint32_t(c.get_int("vocab_size")));
  }
  if (rope.type == "linear") {
    w.add_string(p + "rope.scaling.type", "linear");
    w.add_f32(p + "rope.scaling.factor", float(rope.factor));
  } else if (rope.type == "yarn") {
    w.add_string(p + "rope.scaling.type", "yarn");
    w.add_f32(p + "rope.scaling.factor", float(rope.factor));
    w.add_u32(p + "rope.scaling.original_context_length", uint32_t(rope.original_max_position_embeddings));
  } else if (rope.type == "llama3") {
    // The loader reads these back only with Llama 3's fixed companions (gguf_checkpoint.cc).
    if (arch != "llama" || rope.low_freq_factor != 1.0 || rope.high_freq_factor != 4.0 ||
        rope.original_max_position_embeddings != 8192)
      throw LoadError(c.source() + ": rope_type 'llama3' is written as GGUF only for llama with low_freq_factor 1, "
                      "high_freq_factor 4 and original_max_position_embeddings 8192");
    *rope_freqs = llama3_rope_factors(rope, rope.rotary_dim ? rope.rotary_dim : head_dim);
  }
}

const std::vector<float>* importance_for(const QuantizeOptions& o, const std::string& name) {
  for (const auto& [n, v] : o.importance)
    if (n == name) return &v;
  return nullptr;
}

}  // namespace

QuantizeSummary quantize_checkpoint(const std::string& src_dir, const std::string& out_path, const QuantizeOptions& o) {
  if (!std::filesystem::is_directory(src_dir))
    throw ArgumentError("src_dir (-m): '" + src_dir + "' is not a directory (expected a Hugging Face checkpoint directory)");
  if (find_model_gguf(src_dir))
    throw ArgumentError("src_dir (-m): '" + src_dir + "' holds a GGUF checkpoint; quantize reads Hugging Face safetensors");
  auto files = std::make_shared<ModelFiles>(ModelFiles::open(src_dir));
  const Config& c = files->config();
  const std::vector<std::string> archs = c.has("architectures") ? c.get_string_list("architectures") : std::vector<std::string>{};
  const std::string hf_class = archs.empty() ? "" : archs[0];
  const auto arch = gguf_arch_for_hf(hf_class);
  if (!arch || (arch->gguf != "llama" && arch->gguf != "qwen2" && arch->gguf != "qwen3"))
    throw LoadError(c.source() + ": architecture '" + hf_class +
                    "' cannot be quantized to GGUF yet (supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)");

  QuantizeSummary summary;
  summary.architecture = arch->gguf;
  const int64_t heads = c.get_int("num_attention_heads"), kv_heads = c.get_int_or("num_key_value_heads", heads);
  if (heads <= 0 || kv_heads <= 0)
    throw LoadError(c.source() + ": key 'num_attention_heads' / 'num_key_value_heads': must be positive");
  const int64_t head_dim = c.get_int_or("head_dim", c.get_int("hidden_size") / heads);
  const RopeConfig rope = read_rope(c, head_dim);
  const bool tied = c.get_bool_or("tie_word_embeddings", false);

  GgufWriter w;
  w.add_string("general.architecture", arch->gguf);
  w.add_string("general.type", "model");
  std::filesystem::path dir_name = std::filesystem::path(src_dir).lexically_normal();
  if (dir_name.filename().empty()) dir_name = dir_name.parent_path();  // "models/x/" -> "models/x"
  w.add_string("general.name", dir_name.filename().string());
  w.add_u32("general.file_type", llama_file_type(o.policy.type));
  std::vector<float> rope_freqs;
  add_hparams(w, c, arch->gguf, head_dim, rope, &rope_freqs);
  const int64_t vocab = files->has("model.embed_tokens.weight") ? files->stored("model.embed_tokens.weight").shape.at(0)
                                                                 : c.get_int("vocab_size");
  summary.tokenizer = add_tokenizer_metadata(w, src_dir, vocab);
  bool any_quantized = false;

  if (!rope_freqs.empty()) {
    const std::vector<float> factors = rope_freqs;
    w.add_tensor("rope_freqs.weight", {int64_t(factors.size())}, QuantType::F32, [factors] {
      std::vector<uint8_t> b(factors.size() * 4);
      std::memcpy(b.data(), factors.data(), b.size());
      return b;
    });
  }
  for (const std::string& name : files->names()) {
    if (name.find("rotary_emb.") != std::string::npos) continue;  // buffers recomputed from the config
    if (name == "lm_head.weight" && tied) continue;
    const auto gguf_name = gguf_tensor_name(arch->gguf, name);
    if (!gguf_name)
      throw LoadError(files->source(name) + ": tensor '" + name + "' has no GGUF counterpart for " + arch->gguf);
    const StoredTensor st = files->stored(name);
    if (st.quantized() || (st.type != QuantType::F32 && st.type != QuantType::F16 && st.type != QuantType::BF16))
      throw LoadError(files->source(name) + ": tensor '" + name + "' is stored as " + quant_type_name(st.type) +
                      "; quantize reads F32 / F16 / BF16 weights");
    QuantizedTensor t;
    t.hf_name = name;
    t.gguf_name = *gguf_name;
    t.shape = st.shape;
    t.source = st.type;
    t.type = choose_tensor_type(o.policy, t.gguf_name, st.shape, st.type);
    any_quantized = any_quantized || quant_type_info(uint32_t(t.type))->block_elems > 1;
    const int64_t cols = st.shape.empty() ? 1 : st.shape.back();
    const int64_t numel = st.numel(), rows = cols ? numel / cols : 0;
    t.bytes = uint64_t(rows) * uint64_t(*quant_row_bytes(t.type, cols));
    summary.bytes_in += uint64_t(st.bytes);
    summary.bytes_out += t.bytes;
    // Llama's q_proj / k_proj rows (and biases) interleaved per head, as the converter does.
    int64_t permute_heads = 0;
    if (arch->permuted_qk && name.ends_with("self_attn.q_proj.weight")) permute_heads = heads;
    if (arch->permuted_qk && name.ends_with("self_attn.k_proj.weight")) permute_heads = kv_heads;
    if (arch->permuted_qk && name.ends_with("self_attn.q_proj.bias")) permute_heads = heads;
    if (arch->permuted_qk && name.ends_with("self_attn.k_proj.bias")) permute_heads = kv_heads;
    const int64_t perm_rows = st.shape.size() == 1 ? numel : rows;
    if (permute_heads && (perm_rows % (2 * permute_heads)) != 0)
      throw LoadError(files->source(name) + ": tensor '" + name + "': " + std::to_string(perm_rows) +
                      " rows do not split into " + std::to_string(permute_heads) + " heads of even size");
    const std::vector<float>* imp = importance_for(o, name);
    if (imp && int64_t(imp->size()) != cols)
      throw ArgumentError("importance for '" + name + "': " + std::to_string(imp->size()) + " values, the tensor has " +
                          std::to_string(cols) + " input channels");
    std::vector<int64_t> ne(st.shape.rbegin(), st.shape.rend());
    w.add_tensor(t.gguf_name, ne, t.type, [files, st, t, rows, cols, numel, permute_heads, perm_rows, imp] {
      std::vector<uint8_t> out;
      if (t.type == st.type) {
        out.assign(st.data, st.data + st.bytes);
      } else {
        std::vector<float> x(static_cast<size_t>(numel));
        const std::optional<DType> from = dtype_of(st.type);
        if (!from)
          throw LoadError(t.hf_name + ": stored as " + quant_type_name(st.type) +
                          ", which cannot be re-quantized (a float checkpoint is needed)");
        convert_to_f32(st.data, *from, x.data(), size_t(numel));
        out = quantize_matrix(t.type, x.data(), rows, cols, imp ? imp->data() : nullptr, t.hf_name);
      }
      if (permute_heads) {
        std::vector<uint8_t> permuted(out.size());
        permute_rope_rows(out.data(), permuted.data(), perm_rows, int64_t(out.size()) / perm_rows, permute_heads);
        out.swap(permuted);
      }
      return out;
    });
    summary.tensors.push_back(std::move(t));
  }
  if (any_quantized) w.add_u32("general.quantization_version", 2);
  w.write(out_path);
  return summary;
}

}  // namespace attnzoo
