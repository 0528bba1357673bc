#pragma once
// What the server's tool-call tests share (harmony_test, tool_formats_test, tool_format_sections_test,
// tool_format_pythonic_test): a tools list with one function that takes parameters and one that takes none, whether
// a schema's recognizer takes a text whole, and the repository's fixture files under python/tests/data (the
// published chat templates, the Python-made call fixtures), found from the repository root or the build folder.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
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

// `name` relative to python/tests/data ("chat_templates/X.jinja"); "" when the file is not found.
inline std::string read_test_data(const std::string& name) {
  for (const char* root : {".", ".."}) {
    const std::filesystem::path p = std::filesystem::path(root) / "python/tests/data" / name;
    if (!std::filesystem::exists(p)) continue;
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  return "";
}

}  // namespace attnzoo::testing
