#pragma once
// The MLPs as GPU blocks (device_blocks.h), activations f32. Gated: gate and up projections, the activation times
// up in place, then the down projection added into the residual stream. Plain (Nemotron-H's relu²): up, the
// activation in place, down added into the residual stream.
#include <memory>

#include "layers/mlp.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

std::unique_ptr<DeviceFfn> make_device_gated_mlp(const GatedMlp& mlp, const DeviceLoad& load);
std::unique_ptr<DeviceFfn> make_device_plain_mlp(const PlainMlp& mlp, const DeviceLoad& load);

}  // namespace attnzoo
