#pragma once
// json::parse for text where a document that does not parse is an answer, not an error (what a model wrote, a
// test's output): none instead of a ParseError.
#include <optional>
#include <string_view>

#include "loader/json.h"

namespace attnzoo::json {

inline std::optional<Value> try_parse(std::string_view text, ParseOptions options = {}) {
  try {
    return parse(text, options);
  } catch (const ParseError&) {
    return std::nullopt;
  }
}

}  // namespace attnzoo::json
