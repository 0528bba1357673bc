// Mamba2ForCausalLM: every block is RMSNorm -> Mamba-2 mixer -> residual, with no feed-forward. Tensors live
// under backbone.embeddings / backbone.layers.N.{norm, mixer} / backbone.norm_f, with lm_head (or tied).
#include <algorithm>

#include "layers/mamba2_mixer.h"
#include "loader/load_error.h"
#include "models/backbone_config.h"
#include "models/backbone_layout.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/mamba2_config.h"
#include "models/mamba2_from_checkpoint.h"
#include "models/registry.h"

namespace attnzoo {

namespace {

// Everything the builder reads from config.json, shared with describe_mamba2.
struct Mamba2Shape {
  ModelInfo info;
  Mamba2MixerConfig mc;
};

Mamba2Shape read_shape(const Config& c, const LoadOptions& options) {
  Mamba2Shape s;
  ModelInfo& info = s.info = read_backbone_info(c, options, "mamba2");
  const int64_t H = info.hidden_size;

  Mamba2MixerConfig& mc = s.mc;
  mc.hidden = H;
  mc.num_heads = c.get_int("num_heads");
  mc.head_dim = c.get_int("head_dim");
  mc.n_groups = c.get_int_or("n_groups", 1);
  mc.state_size = c.get_int("state_size");
  mc.conv_kernel = c.get_int_or("conv_kernel", 4);
  mc.norm_eps = float(c.get_float_or("layer_norm_epsilon", 1e-5));
  mc.norm_groups = mc.n_groups;
  std::tie(mc.dt_min, mc.dt_max) = read_time_step_limit(c);
  info.num_heads = mc.num_heads;
  info.head_dim = mc.head_dim;
  info.intermediate_size = mc.inner();
  if (H <= 0 || info.num_layers <= 0 || info.vocab_size <= 0 || mc.num_heads <= 0 || mc.head_dim <= 0 ||
      mc.state_size <= 0 || mc.n_groups <= 0 || mc.conv_kernel <= 0)
    throw LoadError(c.source() + ": sizes (hidden_size, num_hidden_layers, vocab_size, num_heads, head_dim, "
                                 "state_size, n_groups, conv_kernel) must be positive");
  if (mc.num_heads % mc.n_groups != 0)
    throw LoadError(c.source() + ": n_groups (" + std::to_string(mc.n_groups) + ") must divide num_heads (" +
                    std::to_string(mc.num_heads) + ")");
  require_silu_act(c, "the Mamba-2 conv");

  return s;
}

}  // namespace

std::unique_ptr<Model> build_mamba2(ModelFiles files, const LoadOptions& options) {
  const Config& c = files.config();
  const Mamba2Shape shape = read_shape(c, options);
  ModelInfo info = shape.info;
  const Mamba2MixerConfig& mc = shape.mc;

  count_checkpoint(files, info);
  WeightBytes owned;
  BackboneLayoutParts parts;
  parts.norm_eps = mc.norm_eps;
  parts.mixer = [&](const std::string& m) -> std::unique_ptr<SequenceMixer> {
    return load_mamba2_mixer(files, mc, m, options.weights, &owned);  // mc.gated_norm: always here
  };
  return assemble_backbone_layout(std::move(files), std::move(info), parts, options.weights, owned);
}

ModelDescription describe_mamba2(const Config& root, const LoadOptions& options) {
  const Mamba2Shape s = read_shape(root, options);
  ModelDescription d;
  d.info = s.info;
  for (int64_t i = 0; i < d.info.num_layers; ++i)
    d.info.layers.push_back({Mamba2Mixer::kKind, 0, Mamba2Mixer::spec(s.mc)});
  d.info.tied_embeddings = root.get_bool_or("tie_word_embeddings", false);
  return d;
}

}  // namespace attnzoo
