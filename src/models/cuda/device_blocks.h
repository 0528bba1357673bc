#pragma once
// A decoder block's sublayers on a GPU: the runner (decoder_cuda_runner.h) norms the residual stream and hands
// each sublayer the normed rows (bf16); the sublayer adds its output into the residual stream (its output
// projection accumulates), so no separate residual add runs. One file per kind: device_attention.*,
// device_mamba2.*, device_gated_deltanet.*, device_kda.*, device_short_conv.*, device_parallel_mixer.* (Falcon-H1's
// branches side by side), device_mlp.* (gated and plain), device_moe.*.
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
  // h: the block's normed input, bf16 [T, hidden]; x: the residual stream, f32 [T, hidden], which the mixer's
  // output is added into. `layer` names the pool memory (CacheStorage::layer) the mixer reads and writes.
  virtual void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const = 0;
  // Host work before the step's one upload (step.meta is not set yet): what the mixer wants in that copy, such as
  // the attention's decode plans (step.decode_plans). Nothing by default.
  virtual void prepare(const DeviceStep& step, int64_t layer) const {}
  // Whether a decode step's launches may be captured and replayed (step_graphs.h): forward reads nothing from the
  // host that the step's one copy does not bring, copies nothing from pageable memory, allocates nothing once
  // warm, and launches the same kernels with the same arguments whenever the runner's step signature recurs.
  // False by default: a kind that has not been checked for it runs kernel by kernel.
  virtual bool replayable() const { return false; }
};

class DeviceFfn {
 public:
  virtual ~DeviceFfn() = default;
  // As DeviceMixer::forward, without pool memory.
  virtual void forward(const DeviceStep& step, const TensorView& h, const TensorView& x) const = 0;
  // As DeviceMixer::replayable.
  virtual bool replayable() const { return false; }
};

std::unique_ptr<DeviceMixer> make_device_mixer(const SequenceMixer& mixer, const DeviceLoad& load);
std::unique_ptr<DeviceFfn> make_device_ffn(const FeedForward& ffn, const DeviceLoad& load);

}  // namespace attnzoo
