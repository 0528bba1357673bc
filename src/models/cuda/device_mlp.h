#pragma once
// The gated MLP as a GPU block (device_blocks.h): gate and up projections (one stacked [gate|up] GEMM where the
// weights allow), the activation times up in place, then the down projection added into the residual stream. The
// intermediate is bf16.
#include <memory>

#include "layers/mlp.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

std::unique_ptr<DeviceFfn> make_device_gated_mlp(const GatedMlp& mlp, const DeviceLoad& load);

}  // namespace attnzoo
