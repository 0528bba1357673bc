#pragma once
// The flags `attnzoo generate` and `attnzoo chat` share: model, sampling, length, dtype, stop strings, and the
// memory pool (KV dtype, block size, byte budget).
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/generate.h"
#include "models/model.h"

namespace attnzoo::cli {

struct GenerationFlags {
  std::string model, dtype = "auto";
  int64_t max_new_tokens = 128;
  // vLLM's min_tokens: EOS is not drawn before this many new tokens; unset: generation_config.json's
  // min_new_tokens / min_length (sampling_defaults.h), as transformers reads them.
  std::optional<int64_t> min_tokens;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  float presence_penalty = 0.f, frequency_penalty = 0.f;
  std::optional<uint64_t> seed;  // unset (or --seed -1, llama.cpp's): a fresh seed per run
  std::vector<std::string> stop;
  // The memory pool, as Model.load's kv_cache_dtype / block_size / kv_cache_bytes (0: the default budget).
  std::string kv_cache_dtype = "auto";
  int64_t block_size = 16;
  int64_t kv_cache_memory = 0;
  // Where the model runs (models/model_device.h) and, on a GPU, the pool's share of its memory (vLLM's names).
  std::string device = "auto";
  double gpu_memory_utilization = 0.9;
  // llama.cpp's -c / --ctx-size: prompt + answer tokens at most (0: the model's max_position_embeddings).
  int64_t ctx_size = 0;
};

extern const char* kGenerationFlagsUsage;

// `v` as a T, all of it; ArgumentError naming `flag` otherwise.
template <typename T>
T parse_number(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    T out;
    if constexpr (std::is_floating_point_v<T>) out = T(std::stod(v, &used));
    // stoull reads "-1" as 2^64 - 1: a sign is refused rather than wrapped.
    else if constexpr (std::is_unsigned_v<T>) out = v.find('-') == std::string::npos ? T(std::stoull(v, &used)) : T(0);
    else out = T(std::stoll(v, &used));
    if (used == v.size()) return out;
  } catch (const std::exception&) {
  }
  if constexpr (std::is_unsigned_v<T>) throw ArgumentError(flag + ": expected a non-negative integer, got '" + v + "'");
  throw ArgumentError(flag + ": expected a number, got '" + v + "'");
}
// The model `generate` and `chat` run without -m: SmolLM2-135M-Instruct (Q4_1 GGUF) where scripts/setup.sh puts it.
std::string default_model_path();
// Fills flags.model with default_model_path() when -m was not given; ArgumentError naming the file and
// scripts/setup.sh when it is missing. `command` prefixes the message.
void use_default_model(GenerationFlags& flags, const std::string& command);

// Consumes args[i] (and its value, advancing i) when it is one of the shared flags; false when it is not.
// Throws ArgumentError for a missing or malformed value.
bool parse_generation_flag(const std::vector<std::string>& args, size_t& i, GenerationFlags& flags);

// --gpu-memory-utilization's value: a fraction in (0, 1]; errors name `flag`.
double parse_memory_fraction(const std::string& flag, const std::string& text);

// "4G", "512M", "64K" (powers of 1024) or plain bytes, as --kv-cache-memory takes them; errors name `flag`.
int64_t parse_byte_size(const std::string& flag, const std::string& text);

// Never a silent run past the context (--ctx-size when given and smaller, else the model's
// max_position_embeddings; no bound when neither): a prompt that leaves no room for an answer is an
// ArgumentError prefixed by `command`; an answer that would overrun has max_new_tokens lowered, and the notice to
// print is returned (empty when nothing changed).
std::string fit_in_context(const GenerationFlags& flags, const std::string& command, int64_t model_positions,
                           int64_t prompt_tokens, int64_t& max_new_tokens);

// The formats resolve_formats chooses for the flags (format_choice.h) and the memory pool they ask for.
LoadOptions load_options(const GenerationFlags& flags);

// Sampling from resolve_sampling (engine/sampling_defaults.h: the checkpoint's generation_config.json, the flags
// winning), as Model.generate resolves it. EOS ids from the checkpoint (else the tokenizer's). ArgumentError
// naming --min-tokens past -n.
GenerationOptions generation_options(const GenerationFlags& flags);

// GenerationOptions::min_new_tokens for a prompt of `prompt_tokens`: --min-tokens, else the checkpoint's
// (resolve_min_new_tokens: its min_length counts the prompt).
int64_t min_new_tokens(const GenerationFlags& flags, int64_t prompt_tokens);

}  // namespace attnzoo::cli
