#pragma once
// One set of sampling defaults for every front end (`attnzoo generate` / `chat`, Model.generate,
// attnzoo.generate): transformers' rules. The checkpoint's generation_config.json seeds the values (do_sample
// false, temperature 1, top_k 50, top_p 1, min_p 0, repetition_penalty 1 where it says nothing); what the caller
// gives wins. Sampling happens when do_sample says so, or, without do_sample, when the caller asks for a
// temperature above 0 or the checkpoint samples and the caller names no temperature; otherwise it is greedy.
#include <cstdint>
#include <optional>
#include <string>

#include "engine/sampler.h"

namespace attnzoo {

struct SamplingOverrides {
  std::optional<bool> do_sample;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
};

// `model_path`: a checkpoint directory (its generation_config.json, when present, is read), a GGUF file or ""
// (no file: transformers' own defaults). Penalties other than repetition and the seed are left at their
// defaults for the caller to set. The result is validated (ArgumentError naming the field, after the path of
// generation_config.json where the bad value came from it).
SamplingParams resolve_sampling(const std::string& model_path, const SamplingOverrides& overrides);

}  // namespace attnzoo
