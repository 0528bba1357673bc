#pragma once
// The MLPs as GPU blocks (device_blocks.h), reading the block's bf16 normed rows. Gated: gate and up projections
// (one stacked [gate|up] GEMM where the weights allow), the activation times up in place, then the down projection
// added into the residual stream; the intermediate is bf16. Plain (Nemotron-H's relu²): up, the activation in
// place, down added into the residual stream; the intermediate is f32. Falcon-H1's ScaledGatedMlp is the gated one
// with its gate output scaled before the activation and the down projection's input by the down multiplier (the
// projection is linear and adds straight into the residual stream; a down bias is refused beside it).
#include <memory>

#include "layers/mlp.h"
#include "layers/scaled_gated_mlp.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

std::unique_ptr<DeviceFfn> make_device_gated_mlp(const GatedMlp& mlp, const DeviceLoad& load);
std::unique_ptr<DeviceFfn> make_device_scaled_gated_mlp(const ScaledGatedMlp& mlp, const DeviceLoad& load);
std::unique_ptr<DeviceFfn> make_device_plain_mlp(const PlainMlp& mlp, const DeviceLoad& load);

}  // namespace attnzoo
