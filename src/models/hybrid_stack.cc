#include "models/hybrid_stack.h"

#include <algorithm>

#include "loader/json.h"
#include "loader/load_error.h"
#include "models/describe.h"
#include "models/mamba2_config.h"
#include "models/mamba2_from_checkpoint.h"
#include "models/output_head.h"

namespace attnzoo {
namespace {

// One entry of a layer-type list; transformers 5 renamed mamba / attention to linear_attention / full_attention.
bool is_mamba(const std::string& t) { return t == "mamba" || t == "linear_attention"; }
bool is_attention(const std::string& t) { return t == "attention" || t == "full_attention"; }

[[noreturn]] void bad_entry(const Config& c, const char* key, const std::string& entry, size_t i, const char* known) {
  throw LoadError(c.source() + ": key '" + key + "': unknown layer type '" + entry + "' at index " + std::to_string(i) +
                  " (known: " + known + ")");
}

int64_t positive_int(const Config& c, const char* key) {
  const int64_t v = c.get_int(key);
  if (v <= 0) throw LoadError(c.source() + ": key '" + key + "': must be positive, got " + std::to_string(v));
  return v;
}

}  // namespace

std::vector<HybridLayer> nemotron_h_layers(const Config& c) {
  std::vector<HybridLayer> out;
  const char* key = c.has("hybrid_override_pattern") ? "hybrid_override_pattern" : "layers_block_type";
  if (c.has("hybrid_override_pattern")) {
    const std::string p = c.get_string(key);
    for (size_t i = 0; i < p.size(); ++i) {
      switch (p[i]) {
        case 'M': out.push_back({HybridMixer::mamba2, HybridFfn::none}); break;
        case '*': out.push_back({HybridMixer::attention, HybridFfn::none}); break;
        case '-': out.push_back({HybridMixer::none, HybridFfn::dense}); break;
        case 'E': out.push_back({HybridMixer::none, HybridFfn::moe}); break;
        default: bad_entry(c, key, std::string(1, p[i]), i, "M, *, -, E");
      }
    }
  } else {
    const std::vector<std::string> types = c.get_string_list(key);
    for (size_t i = 0; i < types.size(); ++i) {
      const std::string& t = types[i];
      if (is_mamba(t)) {
        out.push_back({HybridMixer::mamba2, HybridFfn::none});
      } else if (is_attention(t)) {
        out.push_back({HybridMixer::attention, HybridFfn::none});
      } else if (t == "mlp" || t == "moe") {
        out.push_back({HybridMixer::none, t == "mlp" ? HybridFfn::dense : HybridFfn::moe});
      } else {
        bad_entry(c, key, t, i, "mamba, linear_attention, attention, full_attention, mlp, moe");
      }
    }
  }
  if (out.empty()) throw LoadError(c.source() + ": key '" + key + "': no layers");
  return out;
}

std::vector<HybridLayer> granite_hybrid_layers(const Config& c, int64_t num_layers, HybridFfn ffn) {
  if (num_layers <= 0) throw LoadError(c.source() + ": key 'num_hidden_layers': must be positive");
  std::vector<HybridLayer> out(size_t(num_layers), HybridLayer{HybridMixer::mamba2, ffn});
  if (c.has("layer_types")) {
    const std::vector<std::string> types = c.get_string_list("layer_types");
    if (int64_t(types.size()) != num_layers)
      throw LoadError(c.source() + ": key 'layer_types': expected " + std::to_string(num_layers) +
                      " entries (num_hidden_layers), got " + std::to_string(types.size()));
    for (size_t i = 0; i < types.size(); ++i) {
      if (is_attention(types[i]))
        out[i].mixer = HybridMixer::attention;
      else if (!is_mamba(types[i]))
        bad_entry(c, "layer_types", types[i], i, "mamba, linear_attention, attention, full_attention");
    }
  } else if (c.has("attn_layer_indices")) {
    for (int64_t i : c.get_int_list("attn_layer_indices")) {
      if (i < 0 || i >= num_layers)
        throw LoadError(c.source() + ": key 'attn_layer_indices': index " + std::to_string(i) + " outside the " +
                        std::to_string(num_layers) + " layers");
      out[size_t(i)].mixer = HybridMixer::attention;
    }
  }
  return out;
}

std::vector<HybridLayer> jamba_layers(const Config& c, int64_t num_layers, int64_t experts) {
  const int64_t attn_period = c.get_int_or("attn_layer_period", 8), attn_offset = c.get_int_or("attn_layer_offset", 4);
  const int64_t expert_period = c.get_int_or("expert_layer_period", 2);
  const int64_t expert_offset = c.get_int_or("expert_layer_offset", 1);
  if (attn_period <= 0 || attn_offset < 0 || attn_offset >= attn_period)
    throw LoadError(c.source() + ": keys 'attn_layer_period' / 'attn_layer_offset': need 0 <= offset < period");
  if (expert_period <= 0 || expert_offset < 0 || expert_offset >= expert_period)
    throw LoadError(c.source() + ": keys 'expert_layer_period' / 'expert_layer_offset': need 0 <= offset < period");
  std::vector<HybridLayer> out;
  for (int64_t i = 0; i < num_layers; ++i)
    out.push_back({i % attn_period == attn_offset ? HybridMixer::attention : HybridMixer::mamba,
                   experts > 1 && i % expert_period == expert_offset ? HybridFfn::moe : HybridFfn::dense});
  return out;
}

std::vector<HybridLayer> lfm2_layers(const Config& c, int64_t num_layers, int64_t first_sparse) {
  std::vector<std::string> types;
  if (c.has("layer_types")) {
    types = c.get_string_list("layer_types");
  } else {
    const bool listed = c.has("full_attn_idxs");
    const std::vector<int64_t> attn = listed ? c.get_int_list("full_attn_idxs") : std::vector<int64_t>{};
    for (int64_t i = 0; i < num_layers; ++i)
      types.push_back(std::find(attn.begin(), attn.end(), i) != attn.end() || !listed ? "full_attention" : "conv");
  }
  if (int64_t(types.size()) != num_layers)
    throw LoadError(c.source() + ": layer_types has " + std::to_string(types.size()) + " entries, expected " +
                    std::to_string(num_layers));
  std::vector<HybridLayer> out;
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] != "conv" && types[i] != "full_attention")
      throw LoadError(c.source() + ": layer_types[" + std::to_string(i) + "] is '" + types[i] +
                      "' (expected conv or full_attention)");
    out.push_back({types[i] == "conv" ? HybridMixer::short_conv : HybridMixer::attention,
                   first_sparse >= 0 && int64_t(i) >= first_sparse ? HybridFfn::moe : HybridFfn::dense});
  }
  return out;
}

std::vector<HybridLayer> minimax_layers(const Config& c, int64_t num_layers) {
  std::vector<HybridLayer> out;
  auto add = [&](bool lightning) {
    out.push_back({lightning ? HybridMixer::lightning : HybridMixer::attention, HybridFfn::moe});
  };
  if (c.has("layer_types")) {
    const std::vector<std::string> types = c.get_string_list("layer_types");
    if (int64_t(types.size()) != num_layers)
      throw LoadError(c.source() + ": key 'layer_types': expected " + std::to_string(num_layers) + " entries");
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] != "linear_attention" && types[i] != "full_attention")
        throw LoadError(c.source() + ": layer_types[" + std::to_string(i) + "] is '" + types[i] +
                        "' (expected linear_attention or full_attention)");
      add(types[i] == "linear_attention");
    }
  } else if (c.has("attn_type_list")) {
    const std::vector<int64_t> types = c.get_int_list("attn_type_list");
    if (int64_t(types.size()) != num_layers)
      throw LoadError(c.source() + ": key 'attn_type_list': expected " + std::to_string(num_layers) + " entries");
    for (int64_t t : types) {
      if (t != 0 && t != 1) throw LoadError(c.source() + ": key 'attn_type_list': entries must be 0 or 1");
      add(t == 0);
    }
  } else {
    for (int64_t i = 0; i < num_layers; ++i) add(i % 2 == 1);
  }
  return out;
}

Mamba2MixerConfig read_hybrid_mamba2(const Config& c, int64_t hidden, float eps, const Mamba2Keys& k) {
  Mamba2MixerConfig mc;
  mc.hidden = hidden;
  mc.num_heads = positive_int(c, k.heads);
  const json::Value* d = c.find(k.head_dim);
  if (d && d->is_number()) {
    mc.head_dim = positive_int(c, k.head_dim);
  } else {  // "auto" or absent: the SSM width expand * hidden split over the heads
    const int64_t inner = c.get_int_or(k.expand, 2) * hidden;
    if (inner <= 0 || inner % mc.num_heads != 0)
      throw LoadError(c.source() + ": key '" + k.heads + "': must divide " + k.expand + " * hidden_size (" +
                      std::to_string(inner) + ")");
    mc.head_dim = inner / mc.num_heads;
  }
  mc.n_groups = c.get_int_or(k.groups, 1);
  mc.state_size = positive_int(c, k.state);
  mc.conv_kernel = c.get_int_or(k.conv, 4);
  mc.gated_norm = true;
  mc.norm_before_gate = false;
  mc.norm_groups = mc.n_groups;
  mc.norm_eps = eps;
  std::tie(mc.dt_min, mc.dt_max) = read_time_step_limit(c);
  if (mc.n_groups <= 0 || mc.conv_kernel <= 0 || mc.num_heads % mc.n_groups != 0)
    throw LoadError(c.source() + ": keys '" + k.groups + "' / '" + k.conv + "': must be positive, " + k.groups +
                    " dividing " + k.heads + " (" + std::to_string(mc.num_heads) + ")");
  const std::string act = c.get_string_or(k.act, "silu");
  if (act != "silu" && act != "swish")
    throw LoadError(c.source() + ": key '" + k.act + "': '" + act + "' is not supported by the Mamba-2 conv (only silu)");
  return mc;
}

std::unique_ptr<AttentionLayer> load_hybrid_attention(const ModelFiles& files, const AttentionConfig& ac,
                                                      const std::string& prefix, const Rope& rope, DType store,
                                                      WeightBytes* owned) {
  const int64_t H = ac.hidden, qw = ac.num_heads * ac.head_dim, kw = ac.num_kv_heads * ac.head_dim;
  auto linear = [&](const char* n, int64_t out, int64_t in) {
    return load_linear(files, prefix + n, out, in, store, owned);
  };
  return std::make_unique<AttentionLayer>(ac, linear(".q_proj", qw, H), linear(".k_proj", kw, H),
                                          linear(".v_proj", kw, H), linear(".o_proj", H, qw), std::nullopt,
                                          std::nullopt, rope, prefix);
}

LayerInfo ffn_only_layer_info(HybridFfn ffn) {
  CacheSpec none;  // no paged part and no state: the pool gives the layer nothing
  none.kind = CacheKind::state;
  return {ffn == HybridFfn::moe ? "moe" : "mlp", 0, none};
}

std::vector<LayerInfo> hybrid_layer_infos(const std::vector<HybridLayer>& layers, const AttentionConfig& ac,
                                          const Mamba2MixerConfig& mc) {
  std::vector<LayerInfo> out;
  for (const HybridLayer& l : layers) {
    if (l.mixer == HybridMixer::attention)
      out.push_back({AttentionLayer::kind_of(ac), ac.window, AttentionLayer::spec(ac)});
    else if (l.mixer == HybridMixer::mamba2)
      out.push_back({Mamba2Mixer::kKind, 0, Mamba2Mixer::spec(mc)});
    else
      out.push_back(ffn_only_layer_info(l.ffn));
  }
  return out;
}

Checked mamba2_parameter_count(const Mamba2MixerConfig& mc, bool proj_bias, bool conv_bias) {
  return linear_params(mc.proj_dim(), mc.hidden, proj_bias) + Checked(mc.conv_dim()) * (mc.conv_kernel + conv_bias) +
         Checked(3) * mc.num_heads + (mc.gated_norm ? mc.inner() : 0) + linear_params(mc.hidden, mc.inner(), proj_bias);
}

Checked attention_parameter_count(const AttentionConfig& ac, bool bias) {
  const int64_t qw = ac.num_heads * ac.head_dim, kw = ac.num_kv_heads * ac.head_dim;
  return linear_params(qw, ac.hidden, bias) + Checked(2) * linear_params(kw, ac.hidden, bias) +
         linear_params(ac.hidden, qw, bias);
}

std::unique_ptr<Model> assemble_hybrid_stack(ModelFiles&& files, ModelInfo&& info, const std::vector<HybridLayer>& layers,
                                             const HybridStackParts& parts, DType store, WeightBytes& owned) {
  const int64_t H = info.hidden_size;
  auto norm = [&](const std::string& name) {
    return RmsNorm(weight(files, name + ".weight", {H}), parts.norm_eps, /*add_one=*/false, name);
  };
  Embedding embed = load_embedding(files, parts.embed, info.vocab_size, H);
  std::vector<DecoderBlock> blocks;
  for (size_t i = 0; i < layers.size(); ++i) {
    const HybridLayer& kind = layers[i];
    const std::string p = parts.layer_prefix + std::to_string(i);
    DecoderBlock block;
    if (kind.mixer != HybridMixer::none) {
      block.input_norm = norm(p + parts.input_norm);
      block.mixer = parts.mixer(kind.mixer, int64_t(i), p);
      if (const auto r = parts.mixer_residual.find(kind.mixer); r != parts.mixer_residual.end())
        block.mixer_alpha = r->second.alpha, block.mixer_beta = r->second.beta;
      info.layers.push_back({block.mixer->kind(), block.mixer->window(), block.mixer->cache_spec()});
    } else {
      info.layers.push_back(ffn_only_layer_info(kind.ffn));
    }
    if (kind.ffn != HybridFfn::none) {
      block.pre_ffn_norm = norm(p + parts.ffn_norm);
      block.ffn = parts.ffn(kind.ffn, int64_t(i), p);
      block.ffn_alpha = parts.ffn_residual.alpha, block.ffn_beta = parts.ffn_residual.beta;
    }
    block.residual_is_normed = parts.residual_is_normed;
    blocks.push_back(std::move(block));
  }
  RmsNorm final_norm = norm(parts.final_norm);
  info.tied_embeddings = parts.tie_by_config ? ties_embeddings(files, files.config().text_config(), parts.tie_fallback)
                                             : !files.has("lm_head.weight");
  Linear lm_head = load_output_head(files, embed, parts.embed, info.tied_embeddings, store, &owned);
  owned.record(info);
  return std::make_unique<DecoderModel>(std::move(files), std::move(info), std::move(embed), std::move(blocks),
                                        std::move(final_norm), std::move(lm_head), parts.options);
}

}  // namespace attnzoo
