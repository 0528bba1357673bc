#pragma once
// A decoder block's sublayers on a GPU: the runner (decoder_cuda_runner.h) norms the residual stream and hands
// each sublayer the normed rows; the sublayer adds its output into the residual stream (its output projection
// accumulates), so no separate residual add runs. One file per kind: device_attention.*, device_mamba2.*,
// device_gated_deltanet.*, device_kda.*, device_short_conv.*, device_mlp.* (gated and plain).
// make_device_mixer / make_device_ffn choose the kind; check_decoder_runs_on_cuda (decoder_cuda_plan.h) has
// refused, on the host and by name, every part they do not cover.
#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "layers/block_parts.h"
#include "models/cuda/device_linear.h"
#include "models/cuda/device_step.h"

namespace attnzoo {

class DeviceMixer {
 public:
  virtual ~DeviceMixer() = default;
  // h: the block's normed input, f32 [T, hidden]; x: the residual stream, f32 [T, hidden], which the mixer's
  // output is added into. `layer` names the pool memory (CacheStorage::layer) the mixer reads and writes.
  virtual void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const = 0;
};

class DeviceFfn {
 public:
  virtual ~DeviceFfn() = default;
  // As DeviceMixer::forward, without pool memory.
  virtual void forward(const DeviceStep& step, const TensorView& h, const TensorView& x) const = 0;
};

std::unique_ptr<DeviceMixer> make_device_mixer(const SequenceMixer& mixer, const DeviceLoad& load);
std::unique_ptr<DeviceFfn> make_device_ffn(const FeedForward& ffn, const DeviceLoad& load);

}  // namespace attnzoo
