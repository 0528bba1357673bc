#pragma once
// Sizes and parameter counts computed from untrusted numbers (config values, file headers): an overflow is an
// ArgumentError naming what was being sized ("<what>: size a x b does not fit in 64 bits"), never a wrapped
// negative size. Sizes are non-negative: a negative operand is refused the same way.
#include <cstdint>

namespace attnzoo {

int64_t checked_mul(int64_t a, int64_t b, const char* what);
int64_t checked_add(int64_t a, int64_t b, const char* what);

// The same checks as an expression type for long parameter-count formulas: mixed expressions promote, so
// `2 * linear_params(a, b)` and `n + Checked(x) * y` are checked; plain int64 * int64 is not.
class Checked {
 public:
  constexpr Checked(int64_t v = 0) : v_(v) {}  // NOLINT: implicit, so int64 operands promote
  int64_t value() const { return v_; }

  friend Checked operator+(Checked a, Checked b) { return checked_add(a.v_, b.v_, kWhat); }
  friend Checked operator*(Checked a, Checked b) { return checked_mul(a.v_, b.v_, kWhat); }
  Checked& operator+=(Checked b) { return *this = *this + b; }

 private:
  static constexpr const char* kWhat = "parameter count (the config's sizes are too large)";
  int64_t v_;
};

}  // namespace attnzoo
