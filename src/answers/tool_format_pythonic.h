#pragma once
// vLLM's `pythonic` call format (Llama 3.2 / Llama 4 / ToolACE templates that ask for "[func_name1(params_name1=
// params_value1, ...), func_name2(params)]"): the whole answer is a Python list of calls with keyword arguments whose
// values are Python literals (strings in either quote, numbers, True / False / None, lists, dicts with string keys);
// they come back as a JSON arguments object. An answer that is not exactly such a list (text around it, a positional
// argument, a variable, an expression, an empty list) is content, as vLLM leaves it. Unlike vLLM (whose literal
// check refuses `-1`), a negative number is a literal here.
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "answers/tool_calls.h"

namespace attnzoo::answers {

ParsedAnswer parse_pythonic_tool_calls(std::string_view text);

// A streamed answer's calls as far as they are written (ToolCallStream): each call's name once '(' follows it, then
// its arguments' JSON text as parse_pythonic_tool_calls writes it, one keyword at a time (once its value is
// followed by ',' or ')'), and the closing '}' at the ')': call i's texts are prefixes of the whole answer's
// arguments of call i. Each byte is read a bounded number of times: the space before the list, a name, a keyword or
// a ',' once, a call's keywords once each, a value parsed once a ',' or ')' outside its strings and brackets may end
// it (before that it cannot be whole). Where such a value still does not parse, no later text can make it (the whole
// answer is content): no call after it streams.
class PythonicCallStream {
 public:
  struct Call {
    std::string name, arguments;
  };
  // `text`: the answer so far, each call's extending the last one's. Returns the first call whose reading this text
  // may have changed (the ones before it are whole and followed by ',').
  size_t feed(std::string_view text);
  const std::vector<Call>& calls() const { return calls_; }

 private:
  bool keyword_may_end(std::string_view text);

  enum class Phase { list, name, keywords, after, stopped };
  Phase phase_ = Phase::list;
  size_t pos_ = 0;      // where the next read begins: the next call's name, keyword, or the ',' after a call
  size_t settled_ = 0;  // calls whole and followed by ','
  std::vector<Call> calls_;
  std::set<std::string> seen_;  // the open call's keywords
  // The open keyword scanned from pos_ for a ',' or ')' outside strings and brackets (ended_: one found); while a
  // call's name is read, where its word characters read so far end.
  size_t lex_ = 0;
  int depth_ = 0;
  char quote_ = 0;
  bool triple_ = false, ended_ = false;
};

// While streaming: an answer that may still be a list of calls (only whitespace so far, or it begins with '[').
bool may_be_pythonic_calls(std::string_view answer);

}  // namespace attnzoo::answers
