#pragma once
// The CUDA decode plans of one model step, shared by its attention layers (decode_cuda.h's PreparedDecodeCuda).
// Layers of one block group with the same heads and options pose the same decode problem but for their tensors'
// addresses: the first such layer validates it (block ids included), plans the split-KV launch and uploads the
// plan's metadata (block table, work list) once; every later layer only launches. Per step: one check, plan and
// copy per block group and decode call instead of one per layer.
#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/softmax/cuda/decode_cuda.h"
#include "models/cuda/device_step.h"

namespace attnzoo {

// What makes two layers' decode problems the same plan: the call, the block group, the layer's attention shape
// and options, and the dtypes and strides of its q / out / cache views.
struct DecodePlanKey {
  int64_t call = 0, block_group = 0;
  int64_t Hq = 0, Hkv = 0, D = 0, window = 0;
  float scale = 0.f, softcap = 0.f;
  DType q_dtype = DType::f32, o_dtype = DType::f32, kv_dtype = DType::f32;
  std::array<int64_t, TensorView::kMaxDims> q_strides{}, o_strides{}, k_strides{}, v_strides{}, ks_strides{}, vs_strides{};
  bool operator==(const DecodePlanKey&) const = default;
};

class StepDecodePlans {
 public:
  struct Plan {
    DecodePlanKey key;
    PreparedDecodeCuda prepared;
    unsigned char* device = nullptr;  // the plan's metadata and partial results, a workspace slot of its own
  };
  // A step's plans start empty; the workspace slots they used are kept for the next step.
  void clear() { plans_.clear(); }
  const Plan* find(const DecodePlanKey& key) const {
    for (const Plan& p : plans_)
      if (p.key == key) return &p;
    return nullptr;
  }
  // Keeps `prepared` for the step and copies its metadata to a workspace slot of its own, stream-ordered.
  const Plan& add(const DecodePlanKey& key, PreparedDecodeCuda prepared, const DeviceStep& step);

 private:
  static constexpr size_t kFirstSlot = 16;  // after the attention's and the feed-forward's slots
  std::vector<Plan> plans_;
};

}  // namespace attnzoo
