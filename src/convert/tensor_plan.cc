#include "convert/tensor_plan.h"

namespace attnzoo {

std::vector<TensorPlan> plan_stacked_experts(const ModelFiles& files, const std::vector<int64_t>& layers,
                                             int64_t experts, const std::string& block,
                                             const std::vector<std::pair<std::string, std::string>>& projections,
                                             size_t found) {
  std::vector<TensorPlan> plans;
  for (int64_t i : layers)
    for (const auto& [hf, gguf] : projections) {
      TensorPlan p;
      p.gguf_name = "blk." + std::to_string(i) + "." + gguf + ".weight";
      for (int64_t e = 0; e < experts; ++e) {
        const std::string name = "model.layers." + std::to_string(i) + "." + block + ".experts." + std::to_string(e) +
                                 "." + hf + ".weight";
        if (!files.has(name)) throw LoadError(files.config().source() + ": tensor '" + name + "' is missing");
        p.sources.push_back(name);
      }
      p.shape = files.stored(p.sources.front()).shape;
      p.shape.insert(p.shape.begin(), experts);
      plans.push_back(std::move(p));
    }
  const uint64_t want = uint64_t(layers.size()) * uint64_t(experts) * projections.size();
  if (found != want)
    throw LoadError(files.config().source() + ": " + std::to_string(found) + " expert tensors, expected " +
                    std::to_string(want) + " (MoE layers x experts x " + std::to_string(projections.size()) + ")");
  return plans;
}

}  // namespace attnzoo
