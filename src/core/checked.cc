#include "core/checked.h"

#include <string>

#include "core/error.h"

namespace attnzoo {

int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    throw ArgumentError(std::string(what) + ": size " + std::to_string(a) + " x " + std::to_string(b) +
                        " does not fit in 64 bits");
  return r;
}

int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r))
    throw ArgumentError(std::string(what) + ": size " + std::to_string(a) + " + " + std::to_string(b) +
                        " does not fit in 64 bits");
  return r;
}

}  // namespace attnzoo
