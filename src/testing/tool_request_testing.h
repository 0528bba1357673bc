#pragma once
// What the server's tool-call tests share (harmony_test, tool_formats_test, tool_format_sections_test): a tools list
// with one function that takes parameters and one that takes none, and whether a schema's recognizer takes a text
// whole.
#include <cstdint>
#include <string>

#include "engine/json_schema.h"
#include "engine/json_schema_recognizer.h"

namespace attnzoo::testing {

inline const std::string kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time"}}])";

inline bool accepts(const JsonSchema& s, const std::string& text) {
  JsonSchemaRecognizer r(s);
  for (char c : text)
    if (!r.push(uint8_t(c))) return false;
  return r.complete();
}

}  // namespace attnzoo::testing
