#pragma once
// The speculative-decoding flags of `attnzoo generate`, `chat` and `serve` (vLLM's speculative_config fields;
// llama.cpp's --model-draft / --draft-max spellings as aliases), and the draft model they load.
#include <memory>
#include <string>
#include <vector>

#include "engine/speculative.h"
#include "models/model.h"

namespace attnzoo::cli {

extern const char* kSpeculativeFlagsUsage;

// Consumes args[i] (and its value) when it is a speculative flag; false when it is not. ArgumentError for a
// missing or malformed value.
bool parse_speculative_flag(const std::vector<std::string>& args, size_t& i, SpeculativeOptions& options);

// Validates the options (a draft model or K without --speculative is an error, not ignored) and loads the draft
// model for the "draft" method (nullptr otherwise) with `load`'s dtype and pool settings. The rollback room in
// the pools is raised by whoever speculates (the scheduler, generate(), the draft proposer), not here.
std::unique_ptr<Model> prepare_speculation(const SpeculativeOptions& options, bool flags_given, const LoadOptions& load);

}  // namespace attnzoo::cli
