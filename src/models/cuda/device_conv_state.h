#pragma once
// What the GPU runner's mixers with a short conv share (device_mamba.*, device_mamba2.*, device_gated_deltanet.*,
// device_kda.*, device_short_conv.*): their pool slots ([conv tail | recurrent state], layers/sequence_schedule.h's
// ConvStateSlot), the causal conv over the packed batch from those tails, column slices of fused projection rows,
// and their small parameters uploaded as f32. Every step runs in place in the pool's slots: the conv and scan
// kernels take the step's slot indices (Batch::state_slots, in the step's one upload; fla / vLLM's
// ssm_state_indices, causal_conv1d's conv_state_indices), read each sequence's state from its slot once and write
// it back there once, and skip the pads' slot -1. A decode step (every sequence one token) uploads nothing of its
// own, so these mixers are replayable() and their models' decode steps run as CUDA graphs, padded to a bucket; a
// prefill runs the packed kernels (which upload the batch's cu_seqlens inside each call) on the same slots.
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "layers/batch.h"
#include "models/cuda/device_linear.h"
#include "models/cuda/device_step.h"

namespace attnzoo {

// The batch's sequences' slots of one layer, as conv [rows, conv_elems] (each row the [channels, W - 1] tail) and
// state [rows, state_elems] (none for LFM2's short conv: state_elems 0) f32 views of the pool's rows, one slot
// stride apart, addressed through slots(). A fresh sequence's slot was zeroed by the pool, a prefix-cache hit's
// restored: every sequence starts from its slot, as the CPU mixers do.
class DeviceConvStates {
 public:
  DeviceConvStates(const DeviceStep& step, int64_t layer, int64_t conv_elems, int64_t state_elems);
  // A decode step: every sequence brings one token (decodes_in_place), so the kernels take one row per sequence.
  bool decode() const { return decode_; }
  const TensorView& conv() const { return conv_; }    // f32 [the pool's rows, conv_elems]
  const TensorView& state() const { return state_; }  // f32 [the pool's rows, state_elems]
  // Sequence n's row of conv() and state(), int32 [S] on the device (negative: a pad, skipped).
  const int32_t* slots() const { return step_.state_slots(); }

 private:
  const DeviceStep& step_;
  bool decode_ = false;
  TensorView conv_, state_;
};

// Whether a step is a decode step for the recurrent mixers: every sequence brings exactly one token (a bucket's
// pads included), so the kernels take one row per sequence and no sequence offsets.
bool decodes_in_place(const Batch& batch);

// The mixer's depthwise causal conv, weight [channels, kernel] and optional bias on the device as f32 (the CPU
// mixers' conv reads them widened too).
class DeviceCausalConv {
 public:
  DeviceCausalConv(const std::vector<float>& weight, const std::vector<float>& bias, int64_t kernel,
                   ConvActivation activation, const DeviceLoad& load);
  // A checkpoint's weight and bias (empty: none) of any float dtype.
  DeviceCausalConv(const TensorView& weight, const TensorView& bias, int64_t kernel, ConvActivation activation,
                   const DeviceLoad& load);
  // x, y: contiguous f32 [T, channels] of the packed batch. Each sequence starts from its tail in its slot of
  // states.conv() and the tail advances in place there (conv_state_indices: causal_conv1d_update on a decode step,
  // causal_conv1d's prefill otherwise).
  void apply(const DeviceStep& step, const DeviceConvStates& states, const TensorView& x, const TensorView& y) const;

 private:
  DeviceBuffer weight_, bias_;
  bool has_bias_ = false;
  int64_t kernel_ = 0;
  ConvActivation activation_ = ConvActivation::none;
};

// The most tokens any of the batch's sequences brings (1: a decode step), which picks the mixers' scan.
int64_t longest_sequence(const Batch& batch);
// Columns [from, from + cols) of a [rows, n] tensor, as a [rows, cols] view with its row stride.
TensorView column_slice(const TensorView& t, int64_t from, int64_t cols);
// A contiguous [rows, cols] f32 view of workspace slot `slot` (at least one float, so empty steps have an address).
TensorView workspace_f32(const DeviceStep& step, size_t slot, int64_t rows, int64_t cols);
// f32 values on the device (at least one float's room).
DeviceBuffer upload_f32(const std::vector<float>& v, const DeviceLoad& load);
// A checkpoint tensor of any float dtype widened to f32 on the host (the conv weights and biases, as the CPU
// mixers' conv reads them).
std::vector<float> widened_f32(const TensorView& t);

}  // namespace attnzoo
