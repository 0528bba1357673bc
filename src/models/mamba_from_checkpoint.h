#pragma once
// A Mamba-1 mixer's tensors as transformers' MambaMixer / JambaMambaMixer write them, shared by the Mamba and
// Jamba builders (Jamba adds weights to the dt / B / C norms: dt_layernorm, b_layernorm, c_layernorm).
#include <memory>
#include <string>

#include "layers/mamba_mixer.h"
#include "loader/model_dir.h"
#include "models/weight_bytes.h"

namespace attnzoo {

// in_proj, x_proj, dt_proj (its bias becomes dt_bias), out_proj, conv1d.weight (+ bias with conv_bias), A_log, D
// and, with norm_weights, the three norms' weights under `prefix`; Linears held as `store`, converted bytes added
// to *owned.
std::unique_ptr<MambaMixer> load_mamba_mixer(const ModelFiles& files, const MambaMixerConfig& mc,
                                             const std::string& prefix, bool conv_bias, bool norm_weights, DType store,
                                             WeightBytes* owned);

}  // namespace attnzoo
