// The resumable scanners (answers/tool_call_scan.h: CallObjectScanner, JsonValueEnd) against the whole-text ones they
// resume (scan_call_object, json_value_end): fed every prefix of a text in turn, a byte at a time or in random
// pieces, each reading equals the whole-text reading of that prefix, field by field.
#include "answers/tool_call_scan.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace attnzoo::answers {
namespace {

const std::vector<std::string> kObjects = {
    R"({"name": "f", "arguments": {"a": "x\"}{", "b": [1, {"c": null}]}})",
    R"({ "arguments" : "{\"a\": 1}" , "name":"g\u00e9" })",
    R"({"name": "f", "parameters": {"q": 1.5e3}, "arguments": {}})",
    R"({"name": "f", "arguments": 12 , "x": true})",
    R"({"name": "f", "arguments": null})",
    R"({"name": })",
    R"({"name": ], "arguments": {}})",
    R"({"na\"me": "f", "name": "\q", "name": "h"})",
    R"({"name": "f" "arguments": {}})",
    R"({})",
    R"({ , })",
    R"([1])",
    R"({"arguments": {"s": "a\\"}, "name": "f"} trailing)",
};

void expect_same_scan(const CallScan& a, const CallScan& b, const std::string& what) {
  EXPECT_EQ(a.broken, b.broken) << what;
  EXPECT_EQ(a.closed, b.closed) << what;
  if (a.closed) EXPECT_EQ(a.end, b.end) << what;
  EXPECT_EQ(a.has_name, b.has_name) << what;
  if (a.has_name) EXPECT_EQ(a.name, b.name) << what;
  EXPECT_EQ(a.args_begin, b.args_begin) << what;
  EXPECT_EQ(a.args_end, b.args_end) << what;
}

// The cut points: every byte, or random pieces (empty ones too).
std::vector<size_t> cuts(size_t size, bool every, std::mt19937& rng) {
  std::vector<size_t> out;
  for (size_t at = 0; at < size;) {
    at = every ? at + 1 : std::min(size, at + rng() % 6);
    out.push_back(at);
  }
  return out;
}

TEST(CallObjectScanner, EveryPrefixReadsAsTheWholeScan) {
  std::mt19937 rng(5);
  for (const ToolFormat f : {ToolFormat::hermes, ToolFormat::llama3_json})
    for (const std::string& text : kObjects)
      for (const bool every : {true, false}) {
        CallObjectScanner s(f);
        for (size_t at : cuts(text.size(), every, rng)) {
          const std::string_view prefix = std::string_view(text).substr(0, at);
          s.advance(prefix);
          const CallScan whole = scan_call_object(prefix, f);
          expect_same_scan(whole, s.scan(), text + " at " + std::to_string(at));
          // The arguments that may be sent: an object's text so far, any other value once whole.
          std::string want;
          if (!whole.broken && whole.args_begin != CallScan::npos && prefix[whole.args_begin] == '{')
            want = std::string(prefix.substr(whole.args_begin, (whole.args_end != CallScan::npos ? whole.args_end
                                                                                                  : prefix.size()) -
                                                                   whole.args_begin));
          else if (!whole.broken && (whole.args_end != CallScan::npos || whole.closed) &&
                   !call_arguments(prefix, whole, want))
            want.clear();
          EXPECT_EQ(std::string(s.arguments(prefix)), want) << text << " at " << at;
          EXPECT_EQ(std::string(s.name()), whole.has_name ? whole.name : "") << text << " at " << at;
        }
      }
}

TEST(JsonValueEnd, EveryPrefixEndsAsTheWholeRead) {
  std::mt19937 rng(9);
  const std::vector<std::string> values = {R"("a\"b\\" ,)", R"({"a": ["}", {"b": "\""}]} x)", "[1, [2], 3]]",
                                           "12.5e3}", "true ", "null", R"("\)", "]", "{\"a\": 1"};
  for (const std::string& v : values)
    for (const bool every : {true, false}) {
      JsonValueEnd e;
      for (size_t at : cuts(v.size(), every, rng)) {
        const std::string_view prefix = std::string_view(v).substr(0, at);
        EXPECT_EQ(e.advance(prefix), json_value_end(prefix, 0)) << v << " at " << at;
      }
    }
}

}  // namespace
}  // namespace attnzoo::answers
