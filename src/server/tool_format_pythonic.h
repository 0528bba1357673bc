#pragma once
// vLLM's `pythonic` call format (Llama 3.2 / Llama 4 / ToolACE templates that ask for "[func_name1(params_name1=
// params_value1, ...), func_name2(params)]"): the whole answer is a Python list of calls with keyword arguments whose
// values are Python literals (strings in either quote, numbers, True / False / None, lists, dicts with string keys);
// they come back as a JSON arguments object. An answer that is not exactly such a list (text around it, a positional
// argument, a variable, an expression, an empty list) is content, as vLLM leaves it. Unlike vLLM (whose literal
// check refuses `-1`), a negative number is a literal here.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/tool_calls.h"

namespace attnzoo::server {

ParsedAnswer parse_pythonic_tool_calls(std::string_view text);

// A streamed answer's calls as far as they are written (ToolCallStream): each call's name once '(' follows it, then
// its arguments' JSON text as parse_pythonic_tool_calls writes it, one keyword at a time (once its value is
// followed by ',' or ')'), and the closing '}' at the ')': call i's texts are prefixes of the whole answer's
// arguments of call i. `settled` calls are followed by ','; the next read resumes at `resume` (a `from`).
struct PythonicSoFar {
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments so far
  size_t settled = 0, resume = 0;
};
PythonicSoFar pythonic_calls_so_far(std::string_view text, size_t from);

// While streaming: an answer that may still be a list of calls (only whitespace so far, or it begins with '[').
bool may_be_pythonic_calls(std::string_view answer);

}  // namespace attnzoo::server
