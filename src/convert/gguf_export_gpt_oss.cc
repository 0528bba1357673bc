#include "convert/gguf_export_gpt_oss.h"

#include <cstring>

#include "convert/tensor_policy.h"
#include "core/dtype.h"
#include "kernels/quant/mxfp4_layout.h"
#include "kernels/quant/quantize.h"
#include "loader/load_error.h"

namespace attnzoo {
namespace {

constexpr const char* kSuffixes[] = {".gate_up_proj", ".gate_up_proj_bias", ".down_proj", ".down_proj_bias",
                                     ".gate_up_proj_blocks", ".gate_up_proj_scales", ".down_proj_blocks",
                                     ".down_proj_scales"};

// A stored tensor of the expected shape (LoadError naming it otherwise).
StoredTensor expect(const ModelFiles& files, const std::string& name, const std::vector<int64_t>& shape) {
  if (!files.has(name)) throw LoadError(files.config().source() + ": tensor '" + name + "' is missing");
  StoredTensor t = files.stored(name);
  if (t.shape != shape) {
    std::string want;
    for (int64_t d : shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
    throw LoadError(files.source(name) + ": tensor '" + name + "': expected [" + want + "]");
  }
  return t;
}

// MXFP4 blocks and scales are U8, which StoredTensor has no format for: their bytes straight from the file.
const uint8_t* u8_bytes(const ModelFiles& files, const std::string& name, const std::vector<int64_t>& shape) {
  if (!files.has(name)) throw LoadError(files.config().source() + ": tensor '" + name + "' is missing");
  const TensorInfo& info = files.info(name);
  if (info.dtype != FileDType::U8 || info.shape != shape)
    throw LoadError(files.source(name) + ": tensor '" + name + "': expected U8 of " + std::to_string(shape.size()) +
                    " dimensions matching the config (MXFP4 codes / exponents)");
  return files.file(name).data(files.stored_name(name));
}

// Element `i` of a float tensor as f32.
float at(const StoredTensor& t, int64_t i) { return load_as_f32(t.data, *dtype_of(t.type), i); }

}  // namespace

void add_gpt_oss_hparams(GgufWriter& w, const Config& c) {
  const int64_t layers = c.get_int("num_hidden_layers");
  if (c.get_float_or("swiglu_alpha", 1.702) != 1.702 || c.get_float_or("swiglu_limit", 7.0) != 7.0)
    throw LoadError(c.source() + ": keys 'swiglu_alpha' / 'swiglu_limit': GGUF (llama.cpp's gpt-oss) holds only "
                    "alpha 1.702 and limit 7");
  if (c.has("layer_types")) {
    const std::vector<std::string> types = c.get_string_list("layer_types");
    bool ok = int64_t(types.size()) == layers;
    for (size_t i = 0; ok && i < types.size(); ++i) ok = (types[i] == "sliding_attention") == (i % 2 == 0);
    if (!ok)
      throw LoadError(c.source() + ": key 'layer_types': GGUF (llama.cpp's gpt-oss) holds only sliding layers "
                      "alternating with full ones, starting with a sliding one");
  }
  const Config r = c.has("rope_parameters") ? c.sub("rope_parameters")
                                            : c.has("rope_scaling") ? c.sub("rope_scaling") : Config::parse("{}", "");
  if (r.get_string_or("rope_type", r.get_string_or("type", "default")) == "yarn") {
    if (r.get_bool_or("truncate", true))
      throw LoadError(c.source() + ": key 'truncate': GGUF has no key for YaRN's truncation, and gpt-oss files are "
                      "read with truncate false (as every gpt-oss release sets it)");
    w.add_f32("gpt-oss.rope.scaling.yarn_beta_fast", float(r.get_float_or("beta_fast", 32.0)));
    w.add_f32("gpt-oss.rope.scaling.yarn_beta_slow", float(r.get_float_or("beta_slow", 1.0)));
  }
  w.add_u32("gpt-oss.expert_count", uint32_t(c.get_int("num_local_experts")));
  w.add_u32("gpt-oss.expert_used_count", uint32_t(c.get_int_or("num_experts_per_tok", 4)));
  w.add_u32("gpt-oss.expert_feed_forward_length", uint32_t(c.get_int("intermediate_size")));
  w.add_u32("gpt-oss.attention.sliding_window", uint32_t(c.get_int("sliding_window")));
}

bool is_gpt_oss_expert_tensor(const std::string& hf_name) {
  if (hf_name.find(".mlp.experts.") == std::string::npos) return false;
  for (const char* s : kSuffixes)
    if (hf_name.ends_with(s)) return true;
  return false;
}

std::optional<std::string> gpt_oss_sinks_name(const std::string& hf_name) {
  constexpr std::string_view kLayers = "model.layers.", kSinks = ".self_attn.sinks";
  if (!hf_name.starts_with(kLayers) || !hf_name.ends_with(kSinks)) return std::nullopt;
  const std::string layer = hf_name.substr(kLayers.size(), hf_name.size() - kLayers.size() - kSinks.size());
  if (layer.empty() || layer.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return "blk." + layer + ".attn_sinks.weight";
}

std::vector<QuantizedTensor> add_gpt_oss_experts(GgufWriter& w, const std::shared_ptr<ModelFiles>& files,
                                                 const Config& c, const QuantizeOptions& o, uint64_t* bytes_in) {
  const int64_t layers = c.get_int("num_hidden_layers"), E = c.get_int("num_local_experts");
  const int64_t H = c.get_int("hidden_size"), I = c.get_int("intermediate_size");
  if (E <= 0 || H <= 0 || I <= 0)
    throw LoadError(c.source() + ": keys 'num_local_experts' / 'hidden_size' / 'intermediate_size': must be positive");
  std::vector<QuantizedTensor> out;
  auto add = [&](const std::string& name, const std::string& hf_name, std::vector<int64_t> shape, QuantType source,
                 QuantType type, GgufWriter::Producer produce) {
    QuantizedTensor t;
    t.hf_name = hf_name;
    t.gguf_name = name;
    t.shape = shape;
    t.source = source;
    t.type = type;
    uint64_t rows = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= uint64_t(shape[d]);
    t.bytes = rows * *quant_row_bytes(type, shape.back());
    w.add_tensor(name, std::vector<int64_t>(shape.rbegin(), shape.rend()), type, std::move(produce));
    out.push_back(t);
  };
  for (int64_t l = 0; l < layers; ++l) {
    const std::string x = "model.layers." + std::to_string(l) + ".mlp.experts", blk = "blk." + std::to_string(l) + ".";
    // Biases: gate / up from gate_up's even / odd features, [E, rows] in F32.
    const StoredTensor gub = expect(*files, x + ".gate_up_proj_bias", {E, 2 * I});
    const StoredTensor dnb = expect(*files, x + ".down_proj_bias", {E, H});
    *bytes_in += uint64_t(gub.bytes + dnb.bytes);
    for (int half = 0; half < 2; ++half)
      add(blk + (half ? "ffn_up_exps.bias" : "ffn_gate_exps.bias"), x + ".gate_up_proj_bias", {E, I}, gub.type,
          QuantType::F32, [gub, E, I, half] {
            std::vector<uint8_t> b(size_t(E * I) * sizeof(float));
            for (int64_t i = 0; i < E * I; ++i) store_from_f32(b.data(), DType::f32, i, at(gub, 2 * i + half));
            return b;
          });
    add(blk + "ffn_down_exps.bias", x + ".down_proj_bias", {E, H}, dnb.type, QuantType::F32, [dnb, E, H] {
      std::vector<uint8_t> b(size_t(E * H) * sizeof(float));
      for (int64_t i = 0; i < E * H; ++i) store_from_f32(b.data(), DType::f32, i, at(dnb, i));
      return b;
    });

    if (files->has(x + ".gate_up_proj_blocks")) {  // MXFP4 kept: the converter's repack, rows split gate / up
      if (H % 32 != 0 || I % 32 != 0)
        throw LoadError(files->source(x + ".gate_up_proj_blocks") + ": tensor '" + x + ".gate_up_proj_blocks': "
                        "hidden_size and intermediate_size must be multiples of 32 for MXFP4");
      const uint8_t* gb = u8_bytes(*files, x + ".gate_up_proj_blocks", {E, 2 * I, H / 32, 16});
      const uint8_t* gs = u8_bytes(*files, x + ".gate_up_proj_scales", {E, 2 * I, H / 32});
      const uint8_t* db = u8_bytes(*files, x + ".down_proj_blocks", {E, H, I / 32, 16});
      const uint8_t* ds = u8_bytes(*files, x + ".down_proj_scales", {E, H, I / 32});
      *bytes_in += uint64_t(E * (2 * I * H + H * I) / 32 * 17);
      for (int half = 0; half < 2; ++half)
        add(blk + (half ? "ffn_up_exps.weight" : "ffn_gate_exps.weight"), x + ".gate_up_proj_blocks", {E, I, H},
            QuantType::MXFP4, QuantType::MXFP4, [files, gb, gs, E, I, H, half] {
              const int64_t g = H / 32;
              std::vector<uint8_t> b(size_t(E * I * g * 17));
              for (int64_t r = 0; r < E * I; ++r) {  // expert r / I, its feature r % I: gate_up row 2 (r % I) + half
                const int64_t src = (r / I) * 2 * I + 2 * (r % I) + half;
                mxfp4_blocks_from_hf(gb + src * g * 16, gs + src * g, g, b.data() + r * g * 17);
              }
              return b;
            });
      add(blk + "ffn_down_exps.weight", x + ".down_proj_blocks", {E, H, I}, QuantType::MXFP4, QuantType::MXFP4,
          [files, db, ds, E, I, H] {
            std::vector<uint8_t> b(size_t(E * H * (I / 32) * 17));
            mxfp4_blocks_from_hf(db, ds, E * H * (I / 32), b.data());
            return b;
          });
      continue;
    }
    // Dense: x @ W tensors [E, in, out] transposed to [E, out, in] rows, then stored in the policy's type.
    const StoredTensor gu = expect(*files, x + ".gate_up_proj", {E, H, 2 * I});
    const StoredTensor dn = expect(*files, x + ".down_proj", {E, I, H});
    for (const StoredTensor* t : {&gu, &dn})
      if (!dtype_of(t->type) || t->quantized())
        throw LoadError(files->source(x) + ": expert tensors of '" + x + "' are stored as " + quant_type_name(t->type) +
                        "; quantize reads F32 / F16 / BF16 (or MXFP4 blocks) weights");
    *bytes_in += uint64_t(gu.bytes + dn.bytes);
    auto dense = [&](const std::string& name, const std::string& hf, const StoredTensor& t, int64_t rows, int64_t cols,
                     int64_t stride, int64_t first) {
      // row r of expert e: column first + r * (stride of features) of the source [E, cols, stride] tensor
      const QuantType type = choose_tensor_type(o.policy, name, {E, rows, cols}, t.type);
      add(name, hf, {E, rows, cols}, t.type, type, [files, t, type, E, rows, cols, stride, first, name] {
        std::vector<float> v(size_t(E * rows * cols));
        const int64_t step = stride == rows ? 1 : 2;  // gate_up's features interleave gate and up
        for (int64_t e = 0; e < E; ++e)
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t k = 0; k < cols; ++k)
              v[size_t((e * rows + r) * cols + k)] = at(t, (e * cols + k) * stride + first + step * r);
        return quantize_matrix(type, v.data(), E * rows, cols, nullptr, name);
      });
    };
    dense(blk + "ffn_gate_exps.weight", x + ".gate_up_proj", gu, I, H, 2 * I, 0);
    dense(blk + "ffn_up_exps.weight", x + ".gate_up_proj", gu, I, H, 2 * I, 1);
    dense(blk + "ffn_down_exps.weight", x + ".down_proj", dn, H, I, H, 0);
  }
  return out;
}

}  // namespace attnzoo
