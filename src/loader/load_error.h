#pragma once
// The one exception the loaders throw for a bad file (missing, truncated, malformed, inconsistent). It derives
// from ArgumentError so front ends map it to Python ValueError without knowing about loading.
#include <string>

#include "core/error.h"

namespace attnzoo {

struct LoadError : ArgumentError {
  using ArgumentError::ArgumentError;
};

}  // namespace attnzoo
