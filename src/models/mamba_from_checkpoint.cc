#include "models/mamba_from_checkpoint.h"

#include "models/decoder.h"

namespace attnzoo {

std::unique_ptr<MambaMixer> load_mamba_mixer(const ModelFiles& files, const MambaMixerConfig& mc,
                                             const std::string& m, bool conv_bias, bool norm_weights, DType store,
                                             WeightBytes* owned) {
  const int64_t H = mc.hidden, E = mc.inner;
  MambaMixerWeights w;
  w.in_proj = load_linear(files, m + ".in_proj", 2 * E, H, store, owned);
  w.x_proj = load_linear(files, m + ".x_proj", mc.x_proj_dim(), E, store, owned);
  // The dt bias goes to the scan (added before softplus), so dt_proj itself runs without it.
  w.dt_proj = Linear::from_weights(weight(files, m + ".dt_proj.weight", {E, mc.dt_rank}), {}, m + ".dt_proj", store,
                                   owned->copied());
  owned->add(w.dt_proj);
  w.dt_bias = weight(files, m + ".dt_proj.bias", {E});
  w.out_proj = load_linear(files, m + ".out_proj", H, E, store, owned);
  w.conv_weight = weight(files, m + ".conv1d.weight", {E, 1, mc.conv_kernel});
  if (conv_bias) w.conv_bias = weight(files, m + ".conv1d.bias", {E});
  w.A_log = weight(files, m + ".A_log", {E, mc.state_size});
  w.D = weight(files, m + ".D", {E});
  if (norm_weights) {
    w.dt_norm = weight(files, m + ".dt_layernorm.weight", {mc.dt_rank});
    w.b_norm = weight(files, m + ".b_layernorm.weight", {mc.state_size});
    w.c_norm = weight(files, m + ".c_layernorm.weight", {mc.state_size});
  }
  return std::make_unique<MambaMixer>(mc, std::move(w), m);
}

}  // namespace attnzoo
