#pragma once
// The one error a chat template raises: a syntax error found while parsing, a runtime error while rendering
// (undefined name, wrong type), the template's own raise_exception(message), or a resource limit. Every one names
// the template line and column. It derives from ArgumentError, so Python sees a ValueError.
#include <string>

#include "core/error.h"

namespace attnzoo::chat {

struct TemplateError : ArgumentError {
  enum class Kind { syntax, runtime, raised, limit };
  TemplateError(Kind kind, int line, int column, const std::string& message);
  Kind kind;
  int line, column;    // 1-based; 0 when the error is not tied to a place in the template
  std::string detail;  // the message alone (for raise_exception: exactly the template's text)
};

const char* kind_name(TemplateError::Kind kind);

}  // namespace attnzoo::chat
