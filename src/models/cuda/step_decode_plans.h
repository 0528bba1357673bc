#pragma once
// The CUDA decode plans of one model step, shared by its attention layers (decode_cuda.h's PreparedDecodeCuda).
// Layers of one block group with the same heads and options pose the same decode problem but for their tensors'
// addresses: before the step's upload the first such layer validates it (block ids included) and plans the
// split-KV launch, and the plan's metadata (work list, block table) travels in the step's one host-to-device copy;
// every layer then only launches. Per step: one check and plan per block group and decode call instead of one
// check, plan, allocation and copy per layer. The step's prefill calls go the same way (prefill_cuda.h's
// PreparedPrefillCuda): layers of one shape, window and options share a plan, one of another window or head dim
// has a plan of its own in the same copy; which one a layer reads is its key, a choice on the host.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "kernels/softmax/cuda/decode_cuda.h"
#include "kernels/softmax/cuda/prefill_cuda.h"
#include "models/cuda/device_step.h"

namespace attnzoo {

struct MlaStepShared;  // device_mla.cc: the step's MLA plan, shared by its MLA layers of one shape

// What makes two layers' decode problems the same plan: the call, the block group, the layer's attention shape
// and options (its sinks by address: layers with sinks never share a plan), and the dtypes and strides of its q /
// out / cache views.
struct DecodePlanKey {
  int64_t call = 0, block_group = 0;
  int64_t Hq = 0, Hkv = 0, D = 0, window = 0;
  float scale = 0.f, softcap = 0.f;
  const float* sinks = nullptr;  // the layer's host sink logits (their values go in the plan's metadata), or none
  DType q_dtype = DType::f32, o_dtype = DType::f32, kv_dtype = DType::f32;
  std::array<int64_t, TensorView::kMaxDims> q_strides{}, o_strides{}, k_strides{}, v_strides{}, ks_strides{},
      vs_strides{};
  bool operator==(const DecodePlanKey&) const = default;
};

// What makes two layers' prefill problems over one call the same plan: the call, the layer's attention shape and
// options (sinks by address, as above), and the dtypes and token / head strides of its q / k / v / out views (the
// work list's offsets are in their elements).
struct PrefillPlanKey {
  int64_t call = 0;
  int64_t Hq = 0, Hkv = 0, D = 0, window = 0;
  float scale = 0.f, softcap = 0.f;
  const float* sinks = nullptr;
  DType q_dtype = DType::f32, o_dtype = DType::f32;
  std::array<int64_t, 8> strides{};  // token and head strides of q, k, v, out
  bool operator==(const PrefillPlanKey&) const = default;
};
// The key of call `call`'s problem `p` (make_prefill_problem's; causal, no ALiBi: the runner's layers).
PrefillPlanKey prefill_plan_key(int64_t call, const AttentionProblem& p);

// Host-to-device copies of plan metadata made outside a step's one upload (add_late / prefill_plan: a layer
// whose plan no mixer prepared), by every runner of the process: the GPU test reads it to know there were none.
int64_t step_plan_late_copies_total();

class StepDecodePlans {
 public:
  struct Plan {
    DecodePlanKey key;
    PreparedDecodeCuda prepared;
    size_t meta_at = 0;                        // where its metadata sits in the step's staging buffer
    const unsigned char* metadata = nullptr;   // on the device, once bound
    unsigned char* partials = nullptr;         // a workspace slot of its own
    size_t slot = 0;
  };
  struct PrefillPlan {
    PrefillPlanKey key;
    PreparedPrefillCuda prepared;
    size_t meta_at = 0;
    const unsigned char* metadata = nullptr;  // on the device, once bound
  };

  // A new step whose own metadata takes the staging buffer's first `at` bytes.
  void begin(size_t at) {
    plans_.clear();
    prefills_.clear();
    next_slot_ = kFirstSlot;
    extra_.clear();
    mla.clear();
    mla_signature.clear();
    end_ = at;
    bound_ = false;
  }
  const Plan* find(const DecodePlanKey& key) const {
    for (const Plan& p : plans_)
      if (p.key == key) return &p;
    return nullptr;
  }
  // Before the upload: keeps `prepared` for the step, its metadata placed after everything before it.
  void add(const DecodePlanKey& key, PreparedDecodeCuda prepared);
  // The staging bytes with every plan's metadata; pack copies them there (staging holds at least end() bytes).
  size_t end() const { return end_; }
  void pack(std::vector<uint8_t>& staging) const;
  // After the upload of the staging buffer to `meta`: the plans' device pointers.
  void bind(const uint8_t* meta, DeviceWorkspace& workspace);
  // A plan no mixer prepared before the upload (its metadata copied on its own, stream-ordered): the step still
  // runs, at one more copy.
  const Plan& add_late(const DecodePlanKey& key, PreparedDecodeCuda prepared, const DeviceStep& step);
  // A prefill call's plan for a layer's problem `p` (make_prefill_problem's, checked), made by `prepare`
  // (prepare_attention_prefill_cuda; tests plan on the host) unless a layer before it with the same key made it.
  // prepare_prefill, before the upload: its metadata travels in the step's copy. prefill_plan, at the launch: the
  // plan prepared, or one made and copied on its own now (the step still runs, at one more copy).
  using PreparePrefill = PreparedPrefillCuda (*)(const AttentionProblem&);
  void prepare_prefill(int64_t call, const AttentionProblem& p, PreparePrefill prepare);
  const PrefillPlan& prefill_plan(int64_t call, const AttentionProblem& p, const DeviceStep& step,
                                  PreparePrefill prepare);
  const PrefillPlan* find_prefill(const PrefillPlanKey& key) const {
    for (const PrefillPlan& p : prefills_)
      if (p.key == key) return &p;
    return nullptr;
  }
  size_t prefill_plans() const { return prefills_.size(); }
  // Another layer kind's plan bytes (device_mla.cc's) to travel in the step's copy, placed after everything before
  // them: their offset, which device(at) turns into their address once bound.
  size_t add_bytes(std::span<const uint8_t> bytes);
  const uint8_t* device(size_t at) const { return meta_ + at; }
  // The step's MLA plans, one per layer shape: made by the first MLA layer of the shape's prepare, read by every
  // MLA layer's forward; what their launches bake in (device_mla.cc), joining append_signature's.
  std::vector<std::shared_ptr<MlaStepShared>> mla;
  std::vector<uint64_t> mla_signature;

  // What the decode plans decided on the host and a launch bakes in (grids, layout, scalar parameters, addresses),
  // for a step graph's signature (step_graphs.h), the MLA plans' included; the work lists' contents travel in the
  // step's copy and may differ. (A step with a prefill call does not replay: its grid changes every step.)
  void append_signature(std::vector<uint64_t>& signature) const;

 private:
  static constexpr size_t kFirstSlot = kDecodePlanSlots;  // workspace slots after every block's
  std::vector<Plan> plans_;
  std::vector<PrefillPlan> prefills_;
  size_t next_slot_ = kFirstSlot;  // the next workspace slot a decode plan's partials or a late copy takes
  std::vector<std::pair<size_t, std::vector<uint8_t>>> extra_;  // add_bytes': (offset, bytes)
  const uint8_t* meta_ = nullptr;
  size_t end_ = 0;
  bool bound_ = false;
};

}  // namespace attnzoo
