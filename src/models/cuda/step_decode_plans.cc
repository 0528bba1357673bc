#include "models/cuda/step_decode_plans.h"

#include <cstring>

#include "core/error.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {
size_t align16(size_t n) { return (n + 15) / 16 * 16; }
}  // namespace

void StepDecodePlans::add(const DecodePlanKey& key, PreparedDecodeCuda prepared) {
  require(!bound_, "decode plans", "added after the step's upload (add_late)");
  Plan p{key, std::move(prepared), align16(end_), nullptr, nullptr};
  end_ = p.meta_at + p.prepared.plan.metadata.size();
  plans_.push_back(std::move(p));
}

void StepDecodePlans::pack(std::vector<uint8_t>& staging) const {
  require(staging.size() >= end_, "staging", "holds fewer bytes than the step's decode plans end at");
  for (const Plan& p : plans_)
    std::memcpy(staging.data() + p.meta_at, p.prepared.plan.metadata.data(), p.prepared.plan.metadata.size());
}

void StepDecodePlans::bind(const uint8_t* meta, DeviceWorkspace& workspace) {
  for (size_t i = 0; i < plans_.size(); ++i) {
    Plan& p = plans_[i];
    p.metadata = meta + p.meta_at;
    p.partials = static_cast<unsigned char*>(workspace.get(kFirstSlot + i, p.prepared.partial_bytes()));
  }
  bound_ = true;
}

const StepDecodePlans::Plan& StepDecodePlans::add_late(const DecodePlanKey& key, PreparedDecodeCuda prepared,
                                                       const DeviceStep& step) {
  const size_t i = plans_.size();
  Plan p{key, std::move(prepared), 0, nullptr, nullptr};
  const cuda_decode::DecodeLaunchPlan& plan = p.prepared.plan;
  // One slot: the metadata, then the partials, as the plan lays out plan.device_bytes.
  auto* buffer = static_cast<unsigned char*>(step.workspace->get(kFirstSlot + i, plan.device_bytes));
  // From pageable memory: returns once staged, and the plan keeps its bytes for the step anyway.
  copy_bytes(buffer, step.device, plan.metadata.data(), Device::cpu(), plan.metadata.size(), step.stream);
  p.metadata = buffer;
  p.partials = buffer + plan.metadata.size();
  plans_.push_back(std::move(p));
  return plans_.back();
}
#endif

}  // namespace attnzoo
