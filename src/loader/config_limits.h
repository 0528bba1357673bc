#pragma once
// Bounds on the well-known numeric keys of a Hugging Face config.json, checked once at load for every object in
// the file (text_config and other nested configs included), so a value no model can have is refused naming its
// key instead of surfacing later as NaN logits, a minutes-long loop or an overflowing size.
#include <string>

#include "loader/json.h"

namespace attnzoo {

// Throws LoadError "<source>: key '<path>': ..." for the first value out of its bound.
void check_config_limits(const json::Value& root, const std::string& source);

}  // namespace attnzoo
