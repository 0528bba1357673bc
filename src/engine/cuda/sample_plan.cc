#include "engine/cuda/sample_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace attnzoo::cuda_sample {

SamplePlan plan_samples(int64_t vocab, std::span<Sampler* const> samplers,
                        std::span<const std::span<const int32_t>> contexts, std::span<const int64_t> logit_rows) {
  require(vocab > 0, "logits", "is empty");
  require(vocab <= INT32_MAX, "logits", "has more entries than token ids can name");
  require(contexts.size() == samplers.size(), "contexts",
          "needs one per row: " + std::to_string(contexts.size()) + " for " + std::to_string(samplers.size()) +
              " rows");
  require(logit_rows.empty() || logit_rows.size() == samplers.size(), "logit_rows", "needs one per sampler");
  SamplePlan plan;
  plan.rows.reserve(samplers.size());
  std::vector<int32_t> sorted, generated;
  for (size_t r = 0; r < samplers.size(); ++r) {
    require(samplers[r] != nullptr, "samplers", "row " + std::to_string(r) + " has none");
    const SamplingParams& sp = samplers[r]->params();
    for (int32_t id : contexts[r])
      require(id >= 0 && id < vocab, "context_ids",
              "token id " + std::to_string(id) + " of row " + std::to_string(r) + " is outside the vocabulary [0, " +
                  std::to_string(vocab) + ")");
    RowSettings s{};
    s.temperature = sp.temperature;
    s.top_p = sp.top_p;
    s.log_min_p = sp.min_p > 0.f ? std::log(sp.min_p) : -INFINITY;
    s.repetition_penalty = sp.repetition_penalty;
    s.presence_penalty = sp.presence_penalty;
    s.frequency_penalty = sp.frequency_penalty;
    s.top_k = sp.top_k > 0 && sp.top_k < vocab ? int32_t(sp.top_k) : 0;
    s.penalty_begin = s.penalty_end = int32_t(plan.penalties.size());
    const int64_t row = logit_rows.empty() ? int64_t(r) : logit_rows[r];
    require(row >= 0 && row <= INT32_MAX, "logit_rows", "entry " + std::to_string(r) + " is out of range");
    s.logits_row = int32_t(row);
    const bool repetition = sp.repetition_penalty != 1.f;
    const bool additive = sp.presence_penalty != 0.f || sp.frequency_penalty != 0.f;
    if ((repetition || additive) && !contexts[r].empty()) {
      // Entries count the generated tokens (presence / frequency); the prompt's ids join only for repetition.
      const size_t prompt = std::min(size_t(samplers[r]->prompt_length()), contexts[r].size());
      generated.assign(contexts[r].begin() + std::ptrdiff_t(prompt), contexts[r].end());
      std::sort(generated.begin(), generated.end());
      sorted.clear();
      if (repetition) {
        sorted.assign(contexts[r].begin(), contexts[r].begin() + std::ptrdiff_t(prompt));
        std::sort(sorted.begin(), sorted.end());
        sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
      }
      size_t g = 0, q = 0;  // merge the distinct prompt ids with the generated ones
      while (g < generated.size() || q < sorted.size()) {
        const int32_t id = q == sorted.size() || (g < generated.size() && generated[g] < sorted[q]) ? generated[g]
                                                                                                   : sorted[q];
        size_t count = 0;
        while (g < generated.size() && generated[g] == id) ++g, ++count;
        if (q < sorted.size() && sorted[q] == id) ++q;
        plan.penalties.push_back({id, int32_t(count)});
      }
      require(plan.penalties.size() <= size_t(INT32_MAX), "contexts", "hold too many distinct tokens");
      s.penalty_end = int32_t(plan.penalties.size());
    }
    plan.rows.push_back(s);
  }
  // Only once every row passed its checks (a throw leaves every sampler where it was, as on the CPU); greedy rows
  // move on too, as Sampler::sample does.
  for (size_t r = 0; r < samplers.size(); ++r) {
    const double u = samplers[r]->take_token_draw();
    plan.rows[r].u = samplers[r]->params().greedy() ? 0.0 : u;
  }
  return plan;
}

std::string row_status_message(int32_t status, int64_t row) {
  switch (status) {
    case kRowOk: return {};
    case kRowNan: return "logits: contain NaN";
    case kRowPosInf: return "logits: contain +inf";
    case kRowAllNegInf: return "logits: are all -inf: no token can be sampled";
    case kRowOverflow: return "temperature: is so small that the scaled logits overflow";
    default: throw DeviceError("sampling kernel: row " + std::to_string(row) + " returned status " + std::to_string(status));
  }
}

void raise_row_status(int32_t status, int64_t row) {
  if (status != kRowOk) throw ArgumentError(row_status_message(status, row) + " (row " + std::to_string(row) + ")");
}

}  // namespace attnzoo::cuda_sample
