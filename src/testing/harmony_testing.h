#pragma once
// gpt-oss harmony answers that the reader's tests (answers/harmony_test.cc) and the response tests
// (server/responses_harmony_test.cc) both read: one call with <|constrain|>, and answers of every shape (analysis and
// final, a call, several calls after a preamble, plain text, stray words, a call cut inside its arguments).
#include <string>
#include <vector>

namespace attnzoo::testing {

inline const std::string kHarmonyCall =
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    "{\"city\": \"Paris\",\n \"days\": 2}";

inline const std::vector<std::string> kHarmonyTexts = {
    "<|channel|>analysis<|message|>a < b<|end|><|start|>assistant<|channel|>final<|message|>x <| y|> done",
    "<|channel|>analysis<|message|>hm<|end|>" + kHarmonyCall,
    "<|channel|>commentary<|message|>pre<|end|><|start|>assistant to=functions.f<|channel|>commentary json"
    "<|message|>{}<|call|><|start|>assistant<|channel|>commentary to=functions.g json<|message|>{\"b\":[1]}",
    "Hello <world>",
    "<|channel|>analysis<|message|>t<|end|>stray<|start|>assistant<|channel|>final<|message|>fin<|return|>",
    "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": "};

}  // namespace attnzoo::testing
