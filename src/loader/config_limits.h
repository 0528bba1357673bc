#pragma once
// Bounds on the well-known numeric keys of a Hugging Face config.json, checked once at load for every object in
// the file (text_config and other nested configs included), so a value no model can have is refused naming its
// key instead of surfacing later as NaN logits, a minutes-long loop or an overflowing size.
#include <cstdint>
#include <string>
#include <string_view>

#include "loader/json.h"

namespace attnzoo {

// Throws LoadError "<source>: key '<path>': ..." for the first value out of its bound.
void check_config_limits(const json::Value& root, const std::string& source);

// The largest value check_config_limits accepts for a count key ("num_hidden_layers"), so readers that derive a
// config from other metadata (GGUF) can refuse the same values before using them; -1 for a key without a bound.
int64_t config_count_limit(std::string_view key);

}  // namespace attnzoo
