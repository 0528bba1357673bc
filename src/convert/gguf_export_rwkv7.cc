#include "convert/gguf_export_rwkv7.h"

#include <algorithm>
#include <cmath>

#include "convert/gguf_export_hybrids.h"
#include "loader/gguf_rwkv7.h"
#include "loader/load_error.h"

namespace attnzoo {
namespace {

constexpr const char* kMixes[] = {"r", "w", "k", "v", "a", "g"};  // time_mix_lerp_fused's order

// Rows of LoRA `lora` (fla's lora.0.weight: [rank, hidden]) in layer `layer`, or 0 when the layer has none.
int64_t lora_rank(const ModelFiles& files, int64_t layer, const char* lora) {
  const std::string name = "model.layers." + std::to_string(layer) + ".attn." + lora + "_lora.lora.0.weight";
  return files.has(name) ? files.stored(name).shape.at(0) : 0;
}

}  // namespace

void add_rwkv7_hparams(GgufWriter& w, const ModelFiles& files, const Config& c) {
  const std::string p = "rwkv7.";
  const int64_t hidden = c.get_int("hidden_size"), layers = c.get_int("num_hidden_layers");
  if (!c.get_bool_or("fuse_norm", true))
    throw LoadError(c.source() + ": key 'fuse_norm': false has no rwkv7 form (GGUF has no key for it; the file "
                    "would be read back with the fused l2norm)");
  const int64_t heads = std::max<int64_t>(1, c.get_int_or("num_heads", 1));
  const int64_t head_dim = c.has("head_dim") ? c.get_int("head_dim") : hidden / heads;
  const std::string key = "model.layers.0.ffn.key.weight";  // [intermediate, hidden]: fla's adjusted width
  if (!files.has(key)) throw LoadError(c.source() + ": tensor '" + key + "' is missing");
  w.add_u32(p + "context_length", 1u << 20);
  w.add_u32(p + "embedding_length", uint32_t(hidden));
  w.add_u32(p + "block_count", uint32_t(layers));
  w.add_f32(p + "attention.layer_norm_epsilon", float(c.get_float_or("norm_eps", 1e-5)));
  w.add_u32(p + "wkv.head_size", uint32_t(head_dim));
  // Layer 0 has no value LoRA in fla: its rank comes from layer 1, else the config, else the converter's default.
  int64_t v_rank = layers > 1 ? lora_rank(files, 1, "v") : 0;
  if (!v_rank) {
    const int64_t fallback = std::max<int64_t>(1, std::lround(std::sqrt(double(hidden)) * 1.3 / 32)) * 32;
    v_rank = c.get_int_or("v_low_rank_dim", fallback);
  }
  w.add_u32(p + "attention.decay_lora_rank", uint32_t(lora_rank(files, 0, "w")));
  w.add_u32(p + "attention.iclr_lora_rank", uint32_t(lora_rank(files, 0, "a")));
  w.add_u32(p + "attention.value_residual_mix_lora_rank", uint32_t(v_rank));
  w.add_u32(p + "attention.gate_lora_rank", uint32_t(lora_rank(files, 0, "g")));
  w.add_u32(p + "feed_forward_length", uint32_t(files.stored(key).shape.at(0)));
  w.add_u32(p + "attention.head_count", 0);  // required by llama.cpp, unused
}

std::vector<TensorPlan> plan_rwkv7(const ModelFiles& files, bool tied) {
  std::vector<TensorPlan> plans;
  for (const std::string& name : files.names()) {
    if (name == "lm_head.weight" && tied) continue;
    const auto [blk, rest] = split_block_name(name);
    TensorPlan p;
    p.sources = {name};
    if (rest.starts_with("attn.x_")) {  // a token-shift mix: all six go into one stack, planned at x_r
      const std::string stem = name.substr(0, name.size() - rest.size()) + "attn.x_";
      bool known = false;
      for (const char* m : kMixes) known = known || rest == std::string("attn.x_") + m;
      if (!known) throw LoadError(files.source(name) + ": tensor '" + name + "' has no GGUF counterpart for rwkv7");
      if (!files.has(stem + "r"))
        throw LoadError(files.source(name) + ": tensor '" + stem + "r' is missing (stacked with '" + name +
                        "' into " + blk + "time_mix_lerp_fused.weight)");
      if (rest != "attn.x_r") continue;
      p.sources.clear();
      for (const char* m : kMixes) {
        p.sources.push_back(stem + m);
        if (!files.has(p.sources.back()))
          throw LoadError(files.source(name) + ": tensor '" + p.sources.back() + "' is missing (stacked into " + blk +
                          "time_mix_lerp_fused.weight)");
      }
      p.gguf_name = blk + "time_mix_lerp_fused.weight";
      p.shape = {6, 1, 1, files.stored(name).numel()};
      p.type = QuantType::F32;
      plans.push_back(std::move(p));
      continue;
    }
    const auto gguf_name = gguf_rwkv7_tensor_name(name);
    if (!gguf_name) throw LoadError(files.source(name) + ": tensor '" + name + "' has no GGUF counterpart for rwkv7");
    p.gguf_name = *gguf_name;
    const StoredTensor stored = files.stored(name);
    for (int64_t d : stored.shape)  // the converter squeezes every tensor
      if (d != 1) p.shape.push_back(d);
    if (rest == "attn.r_k") p.shape = {stored.numel()};  // and flattens r_k
    // time_mix_{w,a,v,g}{0,1,2}.weight: the LoRAs
    const std::string base = p.gguf_name.substr(blk.size());
    const bool lora =
        base.size() == 18 && base.starts_with("time_mix_") && std::string("wavg").find(base[9]) != std::string::npos;
    if (lora) p.type = QuantType::F32;
    if (lora && blk == "blk.0." && base[9] == 'a') {  // the stand-in value LoRA of layer 0
      TensorPlan v = p;
      v.gguf_name = blk + "time_mix_v" + base.substr(10);
      plans.push_back(std::move(v));
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace attnzoo
