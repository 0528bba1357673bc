#pragma once
// Sizes and parameter counts computed from untrusted numbers (config values, file headers): an overflow is an
// ArgumentError ("size does not fit in 64 bits"), never a wrapped negative size. Mixed expressions promote:
// `2 * linear_params(a, b)` and `n + Checked(x) * y` are checked; plain int64 * int64 is not.
#include <cstdint>

#include "core/error.h"

namespace attnzoo {

class Checked {
 public:
  constexpr Checked(int64_t v = 0) : v_(v) {}  // NOLINT: implicit, so int64 operands promote
  int64_t value() const { return v_; }

  friend Checked operator+(Checked a, Checked b) {
    int64_t r;
    if (__builtin_add_overflow(a.v_, b.v_, &r)) overflow();
    return r;
  }
  friend Checked operator*(Checked a, Checked b) {
    int64_t r;
    if (__builtin_mul_overflow(a.v_, b.v_, &r)) overflow();
    return r;
  }
  Checked& operator+=(Checked b) { return *this = *this + b; }

 private:
  [[noreturn]] static void overflow() {
    throw ArgumentError("size: a parameter count or byte size does not fit in 64 bits (the config's sizes are too large)");
  }
  int64_t v_;
};

}  // namespace attnzoo
