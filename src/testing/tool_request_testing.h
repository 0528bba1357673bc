#pragma once
// What the tool-call tests share (the answer readers' in answers/, the request and response sides' in server/): a
// tools list with one function that takes parameters and one that takes none, whether a schema's recognizer takes a
// text whole, "required" answers of two calls per format, and the repository's fixture files under python/tests/data
// (the published chat templates, the Python-made call fixtures), found from the repository root or the build folder,
// and the checks the readers' tests make on them.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "answers/tool_calls.h"
#include "engine/json_schema.h"
#include "engine/json_schema_recognizer.h"
#include "loader/json.h"
#include "loader/json_writer.h"

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

// A call's arguments parsed (the readers keep them as the model wrote them).
inline json::Value args_of(const answers::ToolCall& c) { return json::parse(c.arguments); }

// A value written as json::Writer writes it (keys sorted, no spaces): arguments compared by value, not by text.
inline std::string canonical(const json::Value& v) {
  json::Writer w;
  w.value(v);
  return w.take();
}

// Each published template (chat_templates/FILE) read as its format.
inline void expect_detected(const std::vector<std::pair<std::string, answers::ToolFormat>>& cases) {
  for (const auto& [file, format] : cases) {
    const std::string src = read_test_data("chat_templates/" + file);
    ASSERT_FALSE(src.empty()) << file;
    EXPECT_EQ(answers::detect_tool_format(src), format) << file;
  }
}

// A call read from a Python-made fixture's `text` against the fixture's call: its name, its arguments by value, and
// its id where the fixture names one (Kimi-K2's own), else one of ours ("call_...").
inline void expect_fixture_call(const answers::ToolCall& got, const json::Value& want, const std::string& text) {
  EXPECT_EQ(got.name, want.find("name")->as_string()) << text;
  EXPECT_EQ(canonical(json::parse(got.arguments)), canonical(*want.find("arguments"))) << text;
  if (const json::Value* id = want.find("id")) EXPECT_EQ(got.id, id->as_string()) << text;
  else EXPECT_TRUE(got.id.starts_with("call_")) << text;
}

// "required" with several calls, per format: two calls in the format's own syntax after its forced opening
// (get_time, then get_weather with its city), and `bad`, the same with get_weather's required city left out.
// kRequiredTools offers the two.
inline const std::string kRequiredTools = R"([{"type": "function", "function": {"name": "get_weather", "parameters":
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time"}}])";

struct TwoCalls {
  answers::ToolFormat format;
  std::string text, bad;
};

inline const std::vector<TwoCalls> kRequiredTwoCalls = {
    {answers::ToolFormat::hermes,
     "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", "
     "\"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
     "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", "
     "\"arguments\": {}}"},
    {answers::ToolFormat::mistral,
     "{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]",
     "{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {}}"},
    {answers::ToolFormat::llama3_json,
     "{\"name\": \"get_time\", \"parameters\": {}}; {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
     "{\"name\": \"get_time\", \"parameters\": {}}; {\"name\": \"get_weather\", \"parameters\": {}}"},
};

}  // namespace attnzoo::testing
