#include "models/cuda/step_decode_plans.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
const StepDecodePlans::Plan& StepDecodePlans::add(const DecodePlanKey& key, PreparedDecodeCuda prepared,
                                                  const DeviceStep& step) {
  Plan p{key, std::move(prepared), nullptr};
  const cuda_decode::DecodeLaunchPlan& plan = p.prepared.plan;
  p.device = static_cast<unsigned char*>(step.workspace->get(kFirstSlot + plans_.size(), plan.device_bytes));
  // From pageable memory: returns once staged, and the plan keeps its bytes for the step anyway.
  copy_bytes(p.device, step.device, plan.metadata.data(), Device::cpu(), plan.metadata.size(), step.stream);
  plans_.push_back(std::move(p));
  return plans_.back();
}
#endif

}  // namespace attnzoo
