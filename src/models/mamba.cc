// MambaForCausalLM and FalconMambaForCausalLM: every block is RMSNorm -> Mamba-1 mixer -> residual, with no
// feed-forward. Tensors live under backbone.embeddings / backbone.layers.N.{norm, mixer} / backbone.norm_f, with
// lm_head (or tied). Falcon-Mamba differs only inside the mixer: dt_low, B and C are RMS-normalised.
#include <string>

#include "layers/mamba_mixer.h"
#include "loader/json.h"
#include "loader/load_error.h"
#include "models/backbone_config.h"
#include "models/backbone_layout.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/mamba_from_checkpoint.h"
#include "models/registry.h"

namespace attnzoo {

namespace {

// Everything the builder reads from config.json, shared with describe_mamba.
struct MambaShape {
  ModelInfo info;
  MambaMixerConfig mc;
  float norm_eps = 1e-5f;
  bool use_bias = false, use_conv_bias = true;
};

MambaShape read_shape(const Config& c, const LoadOptions& options) {
  MambaShape s;
  const bool falcon = c.get_string_list("architectures")[0] == "FalconMambaForCausalLM";
  ModelInfo& info = s.info = read_backbone_info(c, options, falcon ? "falcon_mamba" : "mamba");
  const int64_t H = info.hidden_size;

  MambaMixerConfig& mc = s.mc;
  mc.hidden = H;
  mc.inner = c.get_int_or("intermediate_size", c.get_int_or("expand", 2) * H);
  mc.state_size = c.get_int("state_size");
  mc.conv_kernel = c.get_int_or("conv_kernel", 4);
  // transformers resolves "auto" to ceil(hidden / 16) when it builds the config; older files keep the string.
  const json::Value* rank = c.find("time_step_rank");
  mc.dt_rank = !rank || (rank->is_string() && rank->as_string() == "auto") ? (H + 15) / 16
                                                                           : c.get_int("time_step_rank");
  mc.bcdt_rms_norm = falcon;
  mc.mixer_rms_eps = float(c.get_float_or("mixer_rms_eps", 1e-6));
  s.norm_eps = float(c.get_float_or("layer_norm_epsilon", 1e-5));
  s.use_bias = c.get_bool_or("use_bias", false);
  s.use_conv_bias = c.get_bool_or("use_conv_bias", true);
  info.intermediate_size = mc.inner;
  if (H <= 0 || info.num_layers <= 0 || info.vocab_size <= 0 || mc.inner <= 0 || mc.state_size <= 0 ||
      mc.dt_rank <= 0 || mc.conv_kernel <= 0)
    throw LoadError(c.source() + ": sizes (hidden_size, num_hidden_layers, vocab_size, intermediate_size, "
                                 "state_size, time_step_rank, conv_kernel) must be positive");
  if (mc.conv_kernel > 16)
    throw LoadError(c.source() + ": conv_kernel (" + std::to_string(mc.conv_kernel) + ") must be at most 16");
  require_silu_act(c, "the Mamba conv");
  return s;
}

// Parameters of one checkpoint as transformers writes it (the tied lm_head is not stored).
int64_t parameter_estimate(const MambaShape& s, bool tied) {
  const ModelInfo& info = s.info;
  const MambaMixerConfig& mc = s.mc;
  const int64_t H = info.hidden_size, E = mc.inner;
  const Checked layer = H + linear_params(2 * E, H, s.use_bias) + E * mc.conv_kernel + (s.use_conv_bias ? E : 0) +
                        linear_params(mc.x_proj_dim(), E) + linear_params(E, mc.dt_rank, true) +
                        E * mc.state_size + E + linear_params(H, E, s.use_bias);
  return (Checked(info.vocab_size) * H * (tied ? 1 : 2) + info.num_layers * layer + H).value();
}

}  // namespace

std::unique_ptr<Model> build_mamba(ModelFiles files, const LoadOptions& options) {
  const Config& c = files.config();
  const MambaShape shape = read_shape(c, options);
  ModelInfo info = shape.info;
  const MambaMixerConfig& mc = shape.mc;

  count_checkpoint(files, info);
  WeightBytes owned;

  BackboneLayoutParts parts;
  parts.norm_eps = shape.norm_eps;
  parts.tie_fallback = true;  // MambaConfig ties by default
  parts.mixer = [&](const std::string& m) -> std::unique_ptr<SequenceMixer> {
    return load_mamba_mixer(files, mc, m, shape.use_conv_bias, /*norm_weights=*/false, options.weights, &owned);
  };
  return assemble_backbone_layout(std::move(files), std::move(info), parts, options.weights, owned);
}

ModelDescription describe_mamba(const Config& root, const LoadOptions& options) {
  const MambaShape s = read_shape(root, options);
  ModelDescription d;
  d.info = s.info;
  for (int64_t i = 0; i < d.info.num_layers; ++i)
    d.info.layers.push_back({MambaMixer::kKind, 0, MambaMixer::spec(s.mc)});
  d.info.tied_embeddings = root.get_bool_or("tie_word_embeddings", true);
  d.info.parameter_count = parameter_estimate(s, d.info.tied_embeddings);
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
