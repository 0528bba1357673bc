#include "models/mla_from_checkpoint.h"

#include <cmath>

#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"

namespace attnzoo {
namespace {

double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

}  // namespace

ModelInfo read_mla_model_info(const Config& c, const LoadOptions& options, int64_t max_positions_fallback) {
  ModelInfo info;
  info.architecture = c.get_string_list("architectures")[0];
  info.model_type = c.get_string_or("model_type", "");
  info.hidden_size = c.get_int("hidden_size");
  info.intermediate_size = c.get_int_or("intermediate_size", 0);
  info.num_layers = c.get_int("num_hidden_layers");
  info.num_heads = c.get_int("num_attention_heads");
  info.num_kv_heads = info.num_heads;  // MLA: every head reads the one shared latent
  info.vocab_size = c.get_int("vocab_size");
  info.max_position_embeddings = c.has("max_position_embeddings") ? context_length(c) : max_positions_fallback;
  info.checkpoint_dtype = c.dtype();
  info.weights = options.weights;
  return info;
}

MlaConfig read_mla_config(const Config& c, ModelInfo& info, const LoadOptions& options) {
  MlaConfig mc;
  mc.hidden = info.hidden_size;
  mc.num_heads = info.num_heads;
  mc.q_lora_rank = c.has("q_lora_rank") ? c.get_int("q_lora_rank") : 0;
  mc.kv_lora_rank = c.get_int("kv_lora_rank");
  mc.qk_nope_head_dim = c.get_int("qk_nope_head_dim");
  mc.qk_rope_head_dim = c.get_int("qk_rope_head_dim");
  mc.v_head_dim = c.get_int("v_head_dim");
  mc.norm_eps = 1e-6f;
  mc.scale = float(1.0 / std::sqrt(double(mc.qk_head_dim())));
  info.head_dim = mc.qk_head_dim();
  return mc;
}

RopeConfig read_mla_rope(const Config& c, MlaConfig& mc) {
  RopeConfig rc = read_rope(c, mc.qk_rope_head_dim, kWholeHead);
  rc.layout = c.get_bool_or("rope_interleave", true) ? RopeLayout::interleaved : RopeLayout::half;
  if (rc.type != "default" && rc.mscale_all_dim != 0.0) {
    const double m = yarn_mscale(rc.factor, rc.mscale_all_dim);
    mc.scale = float(double(mc.scale) * m * m);
  }
  return rc;
}

std::unique_ptr<MlaMixer> load_mla_mixer(const ModelFiles& files, const MlaConfig& mc, const Rope& rope,
                                         const std::string& prefix, DType store, WeightBytes* owned) {
  const int64_t H = mc.hidden, qw = mc.num_heads * mc.qk_head_dim();
  auto proj = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, prefix + name, out, in, store, owned);
  };
  auto norm = [&](const std::string& name, int64_t dim) {
    return RmsNorm(weight(files, prefix + name + ".weight", {dim}), mc.norm_eps, /*add_one=*/false, prefix + name);
  };
  MlaLayerWeights w;
  if (mc.q_lora_rank > 0) {
    w.q_a_proj.emplace(proj(".q_a_proj", mc.q_lora_rank, H));
    w.q_a_norm.emplace(norm(".q_a_layernorm", mc.q_lora_rank));
    w.q_b_proj.emplace(proj(".q_b_proj", qw, mc.q_lora_rank));
  } else {
    w.q_proj.emplace(proj(".q_proj", qw, H));
  }
  w.kv_a_proj = proj(".kv_a_proj_with_mqa", mc.latent_dim(), H);
  w.kv_a_norm = norm(".kv_a_layernorm", mc.kv_lora_rank);
  w.kv_b_proj = proj(".kv_b_proj", mc.num_heads * (mc.qk_nope_head_dim + mc.v_head_dim), mc.kv_lora_rank);
  w.o_proj = proj(".o_proj", H, mc.num_heads * mc.v_head_dim);
  return std::make_unique<MlaMixer>(mc, std::move(w), rope, prefix);
}

int64_t mla_parameter_count(const MlaConfig& mc, bool attention_bias) {
  const int64_t H = mc.hidden, qw = mc.num_heads * mc.qk_head_dim();
  const bool b = attention_bias;
  const Checked q = mc.q_lora_rank > 0
                        ? linear_params(mc.q_lora_rank, H, b) + mc.q_lora_rank + linear_params(qw, mc.q_lora_rank)
                        : linear_params(qw, H);
  return (q + linear_params(mc.latent_dim(), H, b) + mc.kv_lora_rank +
          Checked(mc.num_heads) * (mc.qk_nope_head_dim + mc.v_head_dim) * mc.kv_lora_rank +
          linear_params(H, mc.num_heads * mc.v_head_dim, b))
      .value();
}

}  // namespace attnzoo
