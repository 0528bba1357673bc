#include "models/mamba2_from_checkpoint.h"

#include "models/decoder.h"

namespace attnzoo {

std::unique_ptr<Mamba2Mixer> load_mamba2_mixer(const ModelFiles& files, const Mamba2MixerConfig& mc,
                                               const std::string& prefix, DType store, WeightBytes* owned) {
  const std::string& m = prefix;
  Mamba2MixerWeights w;
  w.in_proj = load_linear(files, m + ".in_proj", mc.proj_dim(), mc.hidden, store, owned);
  w.out_proj = load_linear(files, m + ".out_proj", mc.hidden, mc.inner(), store, owned);
  w.conv_weight = weight(files, m + ".conv1d.weight", {mc.conv_dim(), 1, mc.conv_kernel});
  w.conv_bias = optional_weight(files, m + ".conv1d.bias", {mc.conv_dim()});
  w.dt_bias = weight(files, m + ".dt_bias", {mc.num_heads});
  w.A_log = weight(files, m + ".A_log", {mc.num_heads});
  w.D = weight(files, m + ".D", {mc.num_heads});
  if (mc.gated_norm) w.norm_weight = weight(files, m + ".norm.weight", {mc.inner()});
  return std::make_unique<Mamba2Mixer>(mc, std::move(w), m);
}

}  // namespace attnzoo
