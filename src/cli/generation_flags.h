#pragma once
// The flags `attnzoo generate` and `attnzoo chat` share: model, sampling, length, dtype, stop strings.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/generate.h"

namespace attnzoo::cli {

struct GenerationFlags {
  std::string model, dtype = "float32";
  int64_t max_new_tokens = 128;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  float presence_penalty = 0.f, frequency_penalty = 0.f;
  uint64_t seed = 0;
  std::vector<std::string> stop;
};

extern const char* kGenerationFlagsUsage;

// Consumes args[i] (and its value, advancing i) when it is one of the shared flags; false when it is not.
// Throws ArgumentError for a missing or malformed value.
bool parse_generation_flag(const std::vector<std::string>& args, size_t& i, GenerationFlags& flags);

// transformers' defaults: greedy unless the checkpoint's generation_config.json sets do_sample; its values seed
// the flags, which win. EOS ids from the checkpoint (else the tokenizer's).
GenerationOptions generation_options(const GenerationFlags& flags);

}  // namespace attnzoo::cli
