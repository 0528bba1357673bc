#pragma once
// What every block of a model step on a GPU reads (models/cuda/device_blocks.h): the batch and the pool's memory
// as the CPU model has them, the step's metadata already on the device (decoder_cuda_plan.h's StepLayout), the
// attention calls the batch became, and scratch memory the step's layers share.
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "layers/batch.h"
#include "models/cuda/decoder_cuda_plan.h"
#include "state/cache_storage.h"

namespace attnzoo {

class StepDecodePlans;  // step_decode_plans.h

// Scratch buffers reused by every layer of a step: the layers run one after another on one stream, so slot i
// holds whatever the running layer puts there. A slot grows to the largest request and never shrinks.
class DeviceWorkspace {
 public:
  explicit DeviceWorkspace(Device device) : device_(device) {}
  void* get(size_t slot, size_t bytes) {
    if (slots_.size() <= slot) slots_.resize(slot + 1);
    if (slots_[slot].bytes() < bytes) {
      slots_[slot] = DeviceBuffer(device_, bytes);
      ++generation_;
    }
    return slots_[slot].data();
  }
  // Counts the reallocations: a captured step (step_graphs.h) is valid while this stays what it was.
  uint64_t generation() const { return generation_; }

 private:
  Device device_;
  std::vector<DeviceBuffer> slots_;
  uint64_t generation_ = 0;
};

// Workspace slots by owner, so that nothing a step still needs shares one with a later user: the attention's from 0,
// the feed-forwards' from 8, the recurrent mixers' from 16 (device_mamba2.cc, ...; a block's mixer and feed-forward
// run one after the other, so theirs may overlap), all below kDecodePlanSlots; from there one per decode plan of
// the step and per plan copied late (step_decode_plans.h: bound before the first layer runs and read by every attention layer after it, so
// no layer in between may regrow them).
constexpr size_t kDecodePlanSlots = 32;

// A tensor over device memory.
inline TensorView device_view(Device device, void* data, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView t = TensorView::contiguous(data, dtype, shape);
  t.device = device;
  return t;
}

struct DeviceStep {
  Device device;
  Stream stream;
  const Batch* batch = nullptr;
  const CacheStorage* storage = nullptr;
  int64_t num_tokens = 0;
  const uint8_t* meta = nullptr;  // the step's metadata on the device, where `layout` says
  const StepLayout* layout = nullptr;
  const std::vector<AttentionCall>* calls = nullptr;
  TensorView positions;  // i32 [T] on the device
  DeviceWorkspace* workspace = nullptr;
  StepDecodePlans* decode_plans = nullptr;  // the attention layers' shared decode and prefill plans and the MLA
                                            // layers' step plan, empty at the step's start

  TensorView view(void* data, DType dtype, std::initializer_list<int64_t> shape) const {
    return device_view(device, data, dtype, shape);
  }
  // The int64 slot_mapping [T] of a block group, on the device.
  const int64_t* slot_mapping(int32_t block_group) const {
    return reinterpret_cast<const int64_t*>(meta + layout->slot_mapping[size_t(block_group)]);
  }
  // Batch::state_slots int32 [S] on the device.
  const int32_t* state_slots() const { return reinterpret_cast<const int32_t*>(meta + layout->state_slots); }
};

}  // namespace attnzoo
