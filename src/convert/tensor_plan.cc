#include "convert/tensor_plan.h"

#include <set>

namespace attnzoo {
namespace {

// The number `text` spells (at most 9 digits), else nullopt.
std::optional<int64_t> index_of(std::string_view text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  int64_t v = 0;
  for (char ch : text) v = v * 10 + (ch - '0');
  return v;
}

}  // namespace

std::optional<int64_t> expert_tensor_layer(const std::string& name, const ExpertTensors& t) {
  if (!name.starts_with(t.layer_prefix) || !name.ends_with(".weight")) return std::nullopt;
  const std::string_view rest = std::string_view(name).substr(t.layer_prefix.size());
  const size_t dot = rest.find('.');
  const std::string experts = "." + t.block + ".experts.";
  if (dot == std::string_view::npos || rest.substr(dot, experts.size()) != experts) return std::nullopt;
  const std::optional<int64_t> layer = index_of(rest.substr(0, dot));
  const std::string_view tail = rest.substr(dot + experts.size());  // <e>.<suffix>.weight
  const size_t edot = tail.find('.');
  if (!layer || edot == std::string_view::npos || !index_of(tail.substr(0, edot))) return std::nullopt;
  const std::string_view after = tail.substr(edot + 1);  // <suffix>.weight
  constexpr size_t kWeight = std::string_view(".weight").size();
  if (after.size() <= kWeight) return std::nullopt;
  const std::string_view suffix = after.substr(0, after.size() - kWeight);
  for (const auto& [hf, gguf] : t.projections)
    if (suffix == hf) return layer;
  return std::nullopt;
}

std::vector<TensorPlan> plan_stacked_experts(const ModelFiles& files, const std::vector<int64_t>& layers,
                                             int64_t experts, const ExpertTensors& t, size_t found) {
  std::vector<TensorPlan> plans;
  for (int64_t i : layers)
    for (const auto& [hf, gguf] : t.projections) {
      TensorPlan p;
      p.gguf_name = "blk." + std::to_string(i) + "." + gguf + ".weight";
      for (int64_t e = 0; e < experts; ++e) {
        const std::string name = t.layer_prefix + std::to_string(i) + "." + t.block + ".experts." + std::to_string(e) +
                                 "." + hf + ".weight";
        if (!files.has(name)) throw LoadError(files.config().source() + ": tensor '" + name + "' is missing");
        p.sources.push_back(name);
      }
      p.shape = files.stored(p.sources.front()).shape;
      p.shape.insert(p.shape.begin(), experts);
      plans.push_back(std::move(p));
    }
  const uint64_t want = uint64_t(layers.size()) * uint64_t(experts) * t.projections.size();
  if (found != want)
    throw LoadError(files.config().source() + ": " + std::to_string(found) + " expert tensors, expected " +
                    std::to_string(want) + " (MoE layers x experts x " + std::to_string(t.projections.size()) + ")");
  return plans;
}

std::vector<TensorPlan> plan_stacked_experts(const ModelFiles& files, const std::vector<std::string>& names,
                                             int64_t experts, const ExpertTensors& t) {
  std::set<int64_t> layers;
  for (const std::string& name : names) {
    const size_t begin = name.starts_with(t.layer_prefix) ? t.layer_prefix.size() : name.size();
    const std::optional<int64_t> layer = index_of(std::string_view(name).substr(begin, name.find('.', begin) - begin));
    if (!layer) throw LoadError(files.source(name) + ": tensor '" + name + "': expected " + t.layer_prefix + "<index>.");
    layers.insert(*layer);
  }
  return plan_stacked_experts(files, std::vector<int64_t>(layers.begin(), layers.end()), experts, t, names.size());
}

}  // namespace attnzoo
