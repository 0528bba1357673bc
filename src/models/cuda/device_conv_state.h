#pragma once
// What the GPU runner's mixers with a short conv share (device_mamba.*, device_mamba2.*, device_gated_deltanet.*,
// device_kda.*, device_short_conv.*): their pool slots ([conv tail | recurrent state], layers/sequence_schedule.h's
// ConvStateSlot) brought into the dense [S, ...] blocks the linear family's kernels take and put back, the causal
// conv over the packed batch from those tails, column slices of fused projection rows, and their small parameters
// uploaded as f32. Those mixers keep DeviceMixer::replayable's
// false: their conv and scan calls take the batch's host cu_seqlens and upload them inside each call, which a step
// graph would not redo, so their models' steps launch kernel by kernel and are never padded to a bucket.
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "layers/batch.h"
#include "models/cuda/device_linear.h"
#include "models/cuda/device_step.h"

namespace attnzoo {

// The batch's sequences' slots of one layer as dense f32 blocks in two workspace slots: conv [S, conv_elems]
// (each row the [channels, W - 1] tail) and state [S, state_elems] (none for LFM2's short conv: state_elems 0).
// gather() fills them from the pool (a fresh
// sequence's slot was zeroed by the pool, a prefix-cache hit's restored: every sequence starts from its slot, as
// the CPU mixers do); scatter() writes them back. Stream-ordered, no host wait.
class DeviceConvStates {
 public:
  DeviceConvStates(const DeviceStep& step, int64_t layer, int64_t conv_elems, int64_t state_elems, size_t conv_slot,
                   size_t state_slot);
  void gather() const;
  void scatter() const;
  const TensorView& conv() const { return conv_; }    // f32 [S, conv_elems]
  const TensorView& state() const { return state_; }  // f32 [S, state_elems]

 private:
  const DeviceStep& step_;
  int64_t seqs_ = 0;
  TensorView slab_conv_, slab_state_;  // the pool's rows, addressed through the step's state slots
  TensorView conv_, state_;
};

// The mixer's depthwise causal conv, weight [channels, kernel] and optional bias on the device as f32 (the CPU
// mixers' conv reads them widened too).
class DeviceCausalConv {
 public:
  DeviceCausalConv(const std::vector<float>& weight, const std::vector<float>& bias, int64_t kernel,
                   ConvActivation activation, const DeviceLoad& load);
  // A checkpoint's weight and bias (empty: none) of any float dtype.
  DeviceCausalConv(const TensorView& weight, const TensorView& bias, int64_t kernel, ConvActivation activation,
                   const DeviceLoad& load);
  // x, y: contiguous f32 [T, channels] of the packed batch. Each sequence starts from its tail in states.conv()
  // ([S, channels * tail]) and the tails advance in place.
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
