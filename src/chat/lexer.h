#pragma once
// Chat template text -> tokens, with Jinja2's whitespace rules as transformers configures them: one trailing
// newline dropped, `{%- -%}` / `{{- -}}` / `{#- -#}` strip all whitespace on that side, trim_blocks (a newline
// right after `%}` or `#}` is dropped) and lstrip_blocks (spaces and tabs from a line's start up to `{%` or `{#`
// are dropped); `{%+` and `+%}` turn those two off for one tag. `{% raw %}` bodies come out as text.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attnzoo::chat {

struct Token {
  enum class Kind : uint8_t { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };
  Kind kind;
  std::string text;  // text / name / operator / the decoded string literal
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1, column = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws TemplateError (syntax) for an unterminated tag, comment, raw block or string, a bad character, or
// unbalanced brackets inside a tag.
std::vector<Token> tokenize(std::string_view source, const LexOptions& options = {});

}  // namespace attnzoo::chat
