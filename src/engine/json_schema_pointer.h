#pragma once
// Where the schema compiler's pieces point when they refuse a schema: JSON pointers into the request's schema
// (RFC 6901), and the one error message every refusal takes.
#include <string>
#include <string_view>

#include "core/error.h"

namespace attnzoo::json_schema_at {

// `pointer` + "/" + `key`, with `~` written `~0` and `/` written `~1`.
inline std::string child(const std::string& pointer, std::string_view key) {
  std::string out = pointer + "/";
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

// Throws ArgumentError "response_format: json_schema at #<pointer>: <what>".
[[noreturn]] inline void refuse(const std::string& pointer, const std::string& what) {
  throw ArgumentError("response_format: json_schema at #" + pointer + ": " + what);
}

}  // namespace attnzoo::json_schema_at
