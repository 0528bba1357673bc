#pragma once
// One set of sampling defaults for every front end (`attnzoo generate` / `chat`, Model.generate,
// attnzoo.generate): transformers' rules. The checkpoint's generation_config.json seeds the values (do_sample
// false, temperature 1, top_k 50, top_p 1, min_p 0, repetition_penalty 1 where it says nothing); what the caller
// gives wins. Sampling happens when do_sample says so, or, without do_sample, when the caller asks for a
// temperature above 0 or the checkpoint samples and the caller names no temperature; otherwise it is greedy. The
// minimum length (min_new_tokens, or min_length counting the prompt) resolves the same way, per prompt.
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

// The new tokens before which EOS may not be drawn (GenerationOptions::min_new_tokens), by transformers' rules for a
// prompt of `prompt_tokens`: the caller's min_new_tokens when given, else generation_config.json's min_new_tokens,
// else its min_length (which counts the prompt) less the prompt, at least 0; 0 without the file. ArgumentError
// ("min_new_tokens") for a negative caller value; LoadError naming the file for a bad one there.
int64_t resolve_min_new_tokens(const std::string& model_path, std::optional<int64_t> min_new_tokens,
                               int64_t prompt_tokens);

}  // namespace attnzoo
