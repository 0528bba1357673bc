#include "engine/json_number_bounds.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "engine/json_schema_pointer.h"
#include "loader/json.h"

namespace attnzoo {
namespace {

using i128 = __int128;
using Stage = NumberBounds::Stage;

i128 pow10(int e) {
  i128 p = 1;
  while (e-- > 0) p *= 10;
  return p;
}

// The range a magnitude may take: the bounds as they are for a positive value, mirrored for a negative one.
struct Range {
  bool has_lo, has_hi, lo_open, hi_open;
  i128 lo, hi;
};
Range magnitudes(const NumberBounds& b, bool negative) {
  if (!negative) return {b.has_lo, b.has_hi, b.lo_open, b.hi_open, b.lo, b.hi};
  return {b.has_hi, b.has_lo, b.hi_open, b.lo_open, -b.hi, -b.lo};
}

// [a, b) (or [a, b] where b_closed) meets the range. The values between are dense decimals: an overlap of positive
// length holds one.
bool overlaps(i128 a, i128 b, bool b_closed, const Range& r) {
  i128 lo = a, hi = b;
  bool lo_open = false, hi_open = !b_closed;
  if (r.has_lo && (r.lo > lo || (r.lo == lo && r.lo_open))) lo = r.lo, lo_open = r.lo_open;
  if (r.has_hi && (r.hi < hi || (r.hi == hi && r.hi_open))) hi = r.hi, hi_open = r.hi_open;
  return lo < hi || (lo == hi && !lo_open && !hi_open);
}

// Integers: [a, b] meets the (closed) range at a multiple of step (magnitudes are >= 0, so is a).
bool meets_integer(i128 a, i128 b, const Range& r, i128 step) {
  if (r.has_lo && r.lo > a) a = r.lo;
  if (r.has_hi && r.hi < b) b = r.hi;
  if (a > b) return false;
  if (step == 0) return true;
  const i128 first = (a + step - 1) / step * step;  // a >= 0
  return first <= b;
}

// A number's range (units of 10^-scale, doubled) as a closed range of whole units: the bounds lie on units (even),
// so an open end moves one unit in.
Range whole_units(const Range& r) {
  return {r.has_lo, r.has_hi, false, false, r.lo / 2 + (r.lo_open ? 1 : 0), r.hi / 2 - (r.hi_open ? 1 : 0)};
}

// Some multiple of `step` lies in the closed range [lo, hi] (either end may be absent; values of any sign).
bool range_holds_multiple(const Range& r, i128 step) {
  if (!r.has_lo || !r.has_hi) return true;
  if (r.lo > r.hi) return false;
  if (step == 0) return true;
  const i128 q = r.lo / step, first = (q * step < r.lo ? q + 1 : q) * step;  // ceil toward +inf
  return first <= r.hi;
}

i128 gcd(i128 a, i128 b) {
  while (b != 0) a %= b, std::swap(a, b);
  return a;
}

using json_schema_at::refuse;

// A bound's exact decimal: the integer's own digits, or the shortest text that reads back as the double.
struct Decimal {
  i128 digits = 0;  // the value times 10^decimals
  int decimals = 0;
};
Decimal decimal_of(const json::Value& v, const std::string& at, const char* key) {
  if (v.is_integer()) return {v.as_int(), 0};
  const double d = v.as_double();
  if (!std::isfinite(d) || std::fabs(d) >= 1e18)
    refuse(at, std::string(key) + " must be a finite number below 1e18 in magnitude");
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::fixed);
  Decimal out;
  bool neg = false, after_dot = false;
  for (const char* c = buf; c < res.ptr; ++c) {
    if (*c == '-') neg = true;
    else if (*c == '.') after_dot = true;
    else out.digits = out.digits * 10 + (*c - '0'), out.decimals += after_dot;
  }
  if (out.decimals > 12) refuse(at, std::string(key) + " has more than 12 decimals");
  if (neg) out.digits = -out.digits;
  return out;
}

// floor / ceil of a decimal (digits / 10^decimals).
i128 floor_of(const Decimal& d) {
  const i128 p = pow10(d.decimals), q = d.digits / p;
  return d.digits < 0 && q * p != d.digits ? q - 1 : q;
}
i128 ceil_of(const Decimal& d) {
  const i128 p = pow10(d.decimals), q = d.digits / p;
  return d.digits > 0 && q * p != d.digits ? q + 1 : q;
}

std::string text_of(i128 v) {
  if (v == 0) return "0";
  std::string out;
  const bool neg = v < 0;
  for (i128 x = neg ? -v : v; x > 0; x /= 10) out.insert(out.begin(), char('0' + int(x % 10)));
  return neg ? "-" + out : out;
}

std::string text_of(const Decimal& d) {
  std::string t = text_of(d.digits < 0 ? -d.digits : d.digits);
  if (d.decimals > 0) {
    if (t.size() <= size_t(d.decimals)) t.insert(0, size_t(d.decimals) + 1 - t.size(), '0');
    t.insert(t.size() - size_t(d.decimals), ".");
  }
  return d.digits < 0 ? "-" + t : t;
}

// The four bounds parse_number_bounds reads (multipleOf besides).
struct Bound {
  const char* key;
  bool upper, open;
};
constexpr Bound kBounds[] = {{"minimum", false, false},
                             {"exclusiveMinimum", false, true},
                             {"maximum", true, false},
                             {"exclusiveMaximum", true, true}};

}  // namespace

bool has_number_bounds(const json::Value& s) {
  return s.find("multipleOf") || std::any_of(std::begin(kBounds), std::end(kBounds),
                                             [&](const Bound& k) { return s.find(k.key) != nullptr; });
}

void number_digit(NumberSoFar& n, bool in_fraction, uint8_t digit, const NumberBounds& b) {
  if (!in_fraction) {
    n.whole = n.whole > (std::numeric_limits<uint64_t>::max() - 9) / 10 ? std::numeric_limits<uint64_t>::max()
                                                                         : n.whole * 10 + digit;
    return;
  }
  if (n.fraction_digits < b.scale) n.fraction = uint64_t(n.fraction) * 10 + digit;
  else if (digit != 0) n.beyond = true;
  if (n.fraction_digits < 255) ++n.fraction_digits;
}

bool NumberBounds::viable(const NumberSoFar& n, Stage stage, bool zero_whole) const {
  const Range r = magnitudes(*this, n.negative);
  if (integer) {
    constexpr i128 kMax = i128(uint64_t(1) << 63);  // int64's range, as magnitudes
    if (stage == Stage::minus) return meets_integer(0, kMax, r, step);
    if (zero_whole) return meets_integer(0, 0, r, step);
    // Each further digit multiplies the candidates by 10: past the range's top none can meet it (as for numbers).
    const i128 top = r.has_hi ? std::min(r.hi, kMax) : kMax;
    for (i128 lo = n.whole, width = 1; lo <= top; lo *= 10, width *= 10)
      if (meets_integer(lo, lo + width - 1, r, step)) return true;
    return false;
  }
  if (step != 0) return viable_multiple(n, stage, zero_whole);
  const i128 unit = 2 * pow10(scale);  // one whole number in the bounds' units
  switch (stage) {
    case Stage::minus: return !r.has_hi || overlaps(0, r.hi, true, r);  // every magnitude >= 0 ("-0" too)
    case Stage::whole: {
      const i128 p = n.whole;
      if (zero_whole) return overlaps(0, unit, false, r);
      if (!r.has_hi) return true;  // enough digits pass any lower bound
      for (i128 lo = p * unit, width = unit; lo <= r.hi; lo *= 10, width *= 10)
        if (overlaps(lo, lo + width, false, r)) return true;
      return false;
    }
    case Stage::dot: return overlaps(i128(n.whole) * unit, (i128(n.whole) + 1) * unit, false, r);
    case Stage::fraction: {
      const int j = n.fraction_digits;
      if (j <= scale) {  // [value, value + 10^-j)
        const i128 lo = (i128(n.whole) * pow10(scale) + i128(uint64_t(n.fraction)) * pow10(scale - j)) * 2;
        return overlaps(lo, lo + 2 * pow10(scale - j), false, r);
      }
      // Past the bounds' decimals the value sits on a unit or strictly inside the next, where no bound is: that
      // open interval is in range whole or not at all (its midpoint decides).
      const i128 lo = (i128(n.whole) * pow10(scale) + i128(uint64_t(n.fraction))) * 2;
      return n.beyond ? overlaps(lo + 1, lo + 1, true, r) : overlaps(lo, lo + 2, false, r);
    }
  }
  return false;
}

// A number with multipleOf: the candidates are whole units (10^-scale) that are multiples of the step, the digits so
// far fixing ranges of them as viable() describes ("12" [12, 13) U [120, 130) U ... in units).
bool NumberBounds::viable_multiple(const NumberSoFar& n, Stage stage, bool zero_whole) const {
  const Range r = whole_units(magnitudes(*this, n.negative));
  const i128 unit = pow10(scale), p = n.whole;
  switch (stage) {
    case Stage::minus: return meets_integer(0, pow10(36), r, step);
    case Stage::whole: {
      if (zero_whole) return meets_integer(0, unit - 1, r, step);
      if (!r.has_hi) return true;  // wider and wider ranges: past any lower bound, and wider than the step
      for (i128 lo = p * unit, width = unit; lo <= r.hi; lo *= 10, width *= 10)
        if (meets_integer(lo, lo + width - 1, r, step)) return true;
      return false;
    }
    case Stage::dot: return meets_integer(p * unit, p * unit + unit - 1, r, step);
    case Stage::fraction: {
      const int j = n.fraction_digits;
      if (j <= scale) {
        const i128 lo = (p * pow10(j) + i128(uint64_t(n.fraction))) * pow10(scale - j);
        return meets_integer(lo, lo + pow10(scale - j) - 1, r, step);
      }
      const i128 v = p * unit + i128(uint64_t(n.fraction));  // a non-zero digit past the step's: no multiple
      return !n.beyond && meets_integer(v, v, r, step);
    }
  }
  return false;
}

bool NumberBounds::holds(const NumberSoFar& n) const {
  const Range r = magnitudes(*this, n.negative);
  if (integer) return meets_integer(n.whole, n.whole, r, step);
  const int j = n.fraction_digits;
  if (step != 0) {
    if (j > scale && n.beyond) return false;
    const i128 v = i128(n.whole) * pow10(scale) + i128(uint64_t(n.fraction)) * pow10(j < scale ? scale - j : 0);
    return meets_integer(v, v, whole_units(r), step);
  }
  i128 v = (i128(n.whole) * pow10(scale) + i128(uint64_t(n.fraction)) * pow10(j < scale ? scale - j : 0)) * 2;
  if (j > scale && n.beyond) v += 1;
  return overlaps(v, v, true, r);
}

NumberBounds parse_number_bounds(const json::Value& s, const std::string& pointer, bool integer) {
  NumberBounds b;
  b.integer = integer;
  std::vector<std::pair<Bound, Decimal>> found;
  for (const Bound& k : kBounds) {
    const json::Value* v = s.find(k.key);
    if (!v) continue;
    const std::string at = pointer + "/" + k.key;
    if (!v->is_number())
      refuse(at, std::string(k.key) + " must be a number (the boolean form of draft 4 is not supported)");
    found.emplace_back(k, decimal_of(*v, at, k.key));
  }
  Decimal step;  // multipleOf, exact
  if (const json::Value* m = s.find("multipleOf")) {
    const std::string at = pointer + "/multipleOf";
    if (!m->is_number() || (m->is_integer() ? m->as_int() <= 0 : !(m->as_double() > 0)))
      refuse(at, "multipleOf must be a positive number");
    step = decimal_of(*m, at, "multipleOf");
    if (step.digits <= 0) refuse(at, "multipleOf must be a positive number");
  }
  if (integer) {
    // An integer n is a multiple of d / 10^k iff n * 10^k is one of d, i.e. iff n is one of d / gcd(d, 10^k).
    if (step.digits > 0) b.step = step.digits / gcd(step.digits, pow10(step.decimals));
    if (b.step > i128(uint64_t(1) << 63)) refuse(pointer + "/multipleOf", "multipleOf must be below 2^63 on integers");
    // Closed integer bounds within int64 (the range a bounded integer is held to).
    b.has_lo = b.has_hi = true;
    b.lo = std::numeric_limits<int64_t>::min(), b.hi = std::numeric_limits<int64_t>::max();
    for (const auto& [k, d] : found) {
      if (k.upper) b.hi = std::min(b.hi, k.open ? ceil_of(d) - 1 : floor_of(d));
      else b.lo = std::max(b.lo, k.open ? floor_of(d) + 1 : ceil_of(d));
    }
    const i128 first = b.step ? (b.lo >= 0 ? (b.lo + b.step - 1) / b.step * b.step : -((-b.lo) / b.step * b.step))
                              : b.lo;
    if (first > b.hi)
      refuse(pointer, "no integer" + std::string(b.step ? " multiple of " + text_of(b.step) : "") +
                          " lies in [" + text_of(b.lo) + ", " + text_of(b.hi) + "] (minimum / maximum)");
    return b;
  }
  for (const auto& [k, d] : found) b.scale = uint8_t(std::max<int>(b.scale, d.decimals));
  b.scale = uint8_t(std::max<int>(b.scale, step.decimals));
  if (step.digits > 0) b.step = step.digits * pow10(b.scale - step.decimals);
  for (const auto& [k, d] : found) {
    const i128 v = d.digits * pow10(b.scale - d.decimals) * 2;
    if (k.upper && (!b.has_hi || v < b.hi || (v == b.hi && k.open))) b.has_hi = true, b.hi = v, b.hi_open = k.open;
    if (!k.upper && (!b.has_lo || v > b.lo || (v == b.lo && k.open))) b.has_lo = true, b.lo = v, b.lo_open = k.open;
  }
  if (b.has_lo && b.has_hi && (b.lo > b.hi || (b.lo == b.hi && (b.lo_open || b.hi_open))))
    refuse(pointer, "no number lies between the minimum and the maximum");
  if (b.step != 0 && !range_holds_multiple(whole_units(magnitudes(b, false)), b.step))
    refuse(pointer, "no multiple of " + text_of(step) + " lies between the minimum and the maximum");
  return b;
}

}  // namespace attnzoo
