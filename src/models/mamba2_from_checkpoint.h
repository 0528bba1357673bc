#pragma once
// A Mamba-2 mixer's tensors as transformers' Mamba2Mixer writes them, shared by the Mamba-2 and Falcon-H1 builders
// (which differ only in where the mixer sits and whether its gated norm exists: mc.gated_norm).
#include <memory>
#include <string>

#include "layers/mamba2_mixer.h"
#include "loader/model_dir.h"
#include "models/weight_bytes.h"

namespace attnzoo {

// in_proj, out_proj, conv1d.weight (+ optional bias), dt_bias, A_log, D and, with mc.gated_norm, norm.weight under
// `prefix`; Linears held as `store`, converted bytes added to *owned.
std::unique_ptr<Mamba2Mixer> load_mamba2_mixer(const ModelFiles& files, const Mamba2MixerConfig& mc,
                                               const std::string& prefix, DType store, WeightBytes* owned);

}  // namespace attnzoo
