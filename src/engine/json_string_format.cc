#include "engine/json_string_format.h"

namespace attnzoo {
namespace {

bool digit(uint8_t b) { return b >= '0' && b <= '9'; }
bool hex(uint8_t b) { return digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }
bool alnum(uint8_t b) { return digit(b) || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z'); }

// Dates and times walk one template: `at` indexes it up to the seconds (19), then 20 is the fraction, 40 a closing
// "Z", 41-45 the offset "hh:MM", 46 its end. Letters are digit slots: y year, m month, d day, h hour, M minute,
// s second; others stand for themselves.
constexpr std::string_view kDateTime = "yyyy-mm-ddThh:MM:ss";
constexpr std::string_view kOffset = "hh:MM";
constexpr uint8_t kDateEnd = 10, kTimeStart = 11, kSeconds = 19, kFraction = 20, kZulu = 40, kOffsetAt = 41,
                  kOffsetEnd = 46;

int days_in(int month, int year) {
  if (month == 2) return (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) ? 29 : 28;
  return month == 4 || month == 6 || month == 9 || month == 11 ? 30 : 31;
}

// A digit in slot `slot`, `first`: the pair's first digit (s.field holds it for the second).
bool slot_digit(char slot, bool first, FormatSoFar& s, int d) {
  switch (slot) {
    case 'y':
      s.wide = uint16_t(s.wide * 10 + d);
      return s.at != 3 || s.wide != 0;  // no year 0000
    case 'm':
      if (first) return d <= 1 && (s.field = uint8_t(d), true);
      if (s.field == 0 ? d == 0 : d > 2) return false;
      s.aux = uint8_t(s.field * 10 + d);
      return true;
    case 'd': {
      const int most = days_in(s.aux, s.wide);
      if (first) return d * 10 <= most && (s.field = uint8_t(d), true);  // "3" needs a 30th; "2" always fits
      const int day = s.field * 10 + d;
      return day >= 1 && day <= most;
    }
    case 'h':
      if (first) return d <= 2 && (s.field = uint8_t(d), true);
      return s.field * 10 + d <= 23;
    default:  // minutes, seconds
      return !first || d <= 5;
  }
}

bool date_time_byte(FormatSoFar& s, uint8_t b) {
  const bool in_offset = s.at >= kOffsetAt && s.at < kOffsetEnd;
  if (s.at < kSeconds || in_offset) {
    const char slot = in_offset ? kOffset[s.at - kOffsetAt] : kDateTime[s.at];
    const bool is_slot = slot == 'y' || slot == 'm' || slot == 'd' || slot == 'h' || slot == 'M' || slot == 's';
    if (!is_slot) return b == uint8_t(slot) && (++s.at, true);
    if (!digit(b)) return false;
    // A pair's first digit is the one whose template neighbour to the left is not the same slot (years: any).
    const std::string_view t = in_offset ? kOffset : kDateTime;
    const size_t i = in_offset ? s.at - kOffsetAt : s.at;
    const bool first = i == 0 || t[i - 1] != slot;
    if (!slot_digit(slot, first, s, b - '0')) return false;
    ++s.at;
    return true;
  }
  const bool zone = b == 'Z' || b == '+' || b == '-';
  if (s.at == kSeconds) {
    if (b == '.') return s.at = kFraction, s.aux = 0, true;
  } else if (s.at == kFraction) {
    if (digit(b)) return s.aux < 6 && (++s.aux, true);
    if (s.aux == 0) return false;
  } else {
    return false;  // past the zone
  }
  if (!zone) return false;
  s.at = b == 'Z' ? kZulu : kOffsetAt;
  return true;
}

// uuid: `at` counts the characters of the 8-4-4-4-12 layout.
bool uuid_byte(FormatSoFar& s, uint8_t b) {
  if (s.at >= 36) return false;
  const bool dash = s.at == 8 || s.at == 13 || s.at == 18 || s.at == 23;
  if (dash ? b != '-' : !hex(b)) return false;
  ++s.at;
  return true;
}

// ipv4: `at` parts finished, `field` the current part's value, `aux` its digits.
bool ipv4_byte(FormatSoFar& s, uint8_t b) {
  if (b == '.') {
    if (s.aux == 0 || s.at == 3) return false;
    ++s.at, s.aux = 0, s.field = 0;
    return true;
  }
  if (!digit(b) || (s.aux > 0 && s.field == 0)) return false;  // no leading zero
  const int v = s.field * 10 + (b - '0');
  if (v > 255) return false;
  s.field = uint8_t(v), ++s.aux;
  return true;
}

bool atext(uint8_t b) {
  return alnum(b) || std::string_view("!#$%&'*+/=?^_`{|}~-").find(char(b)) != std::string_view::npos;
}

// email: `at` 0 local part, 1 domain; `aux` the part's length; `field` the atom / label's; `wide` the domain's
// labels; `last` the byte before.
bool email_byte(FormatSoFar& s, uint8_t b) {
  if (s.at == 0) {
    if (b == '@') {
      if (s.field == 0) return false;
      s.at = 1, s.aux = 0, s.field = 0, s.wide = 1, s.last = b;
      return true;
    }
    if (b == '.' ? s.field == 0 || s.aux + 2 > 64 : !atext(b) || s.aux + 1 > 64) return false;
    s.field = b == '.' ? 0 : uint8_t(s.field + 1);
    ++s.aux, s.last = b;
    return true;
  }
  if (b == '.') {
    if (s.field == 0 || s.last == '-') return false;
    s.field = 0, ++s.wide;
  } else if (alnum(b) || b == '-') {
    if ((b == '-' && s.field == 0) || s.field + 1 + (b == '-') > 63) return false;  // a hyphen needs a letter after
    ++s.field;
  } else {
    return false;
  }
  s.last = b;
  // Room left in 253 characters for the shortest ending: a character after '.' / '-', and a second label.
  const int need = (s.field == 0 || s.last == '-') + (s.wide < 2 ? 2 : 0);
  if (s.aux + 1 + need > 253) return false;
  ++s.aux;
  return true;
}

// duration: `at` 0 before "P", 1 the date part, 2 the time part (after "T"), 3 after a week; `field` the last unit
// written (date: 1 Y, 2 M, 3 D; time: 1 H, 2 M, 3 S; 0 none yet); `aux` the digits of the number under way;
// `wide` the parts written.
bool duration_byte(FormatSoFar& s, uint8_t b) {
  if (s.at == 0) return b == 'P' && (s.at = 1, true);
  if (s.at == 3) return false;
  if (digit(b)) return s.field < 3 && s.aux < 9 && (++s.aux, true);
  if (b == 'T') return s.at == 1 && s.aux == 0 && (s.at = 2, s.field = 0, true);
  if (s.aux == 0) return false;
  if (b == 'W') return s.at == 1 && s.wide == 0 && (s.at = 3, s.aux = 0, true);
  const std::string_view units = s.at == 1 ? "YMD" : "HMS";
  const size_t u = units.find(char(b));
  if (u == std::string_view::npos) return false;
  // Units come in order, each right after the one before (JSON Schema's grammar: "P1Y2M", not "P1Y2D").
  const int unit = int(u) + 1;
  if (s.field != 0 && unit != s.field + 1) return false;
  s.field = uint8_t(unit), s.aux = 0, ++s.wide;
  return true;
}

}  // namespace

StringFormat string_format(std::string_view name) {
  if (name == "date") return StringFormat::date;
  if (name == "time") return StringFormat::time;
  if (name == "date-time") return StringFormat::date_time;
  if (name == "uuid") return StringFormat::uuid;
  if (name == "ipv4") return StringFormat::ipv4;
  if (name == "email") return StringFormat::email;
  if (name == "duration") return StringFormat::duration;
  return StringFormat::none;
}

FormatSoFar format_start(StringFormat f) {
  FormatSoFar s{};
  if (f == StringFormat::time) s.at = kTimeStart;
  return s;
}

bool format_byte(StringFormat f, FormatSoFar& s, uint8_t b) {
  switch (f) {
    case StringFormat::date: return s.at < kDateEnd && date_time_byte(s, b);
    case StringFormat::time:
    case StringFormat::date_time: return date_time_byte(s, b);
    case StringFormat::uuid: return uuid_byte(s, b);
    case StringFormat::ipv4: return ipv4_byte(s, b);
    case StringFormat::email: return email_byte(s, b);
    case StringFormat::duration: return duration_byte(s, b);
    case StringFormat::none: return false;
  }
  return false;
}

bool format_may_end(StringFormat f, const FormatSoFar& s) {
  switch (f) {
    case StringFormat::date: return s.at == kDateEnd;
    case StringFormat::time:
    case StringFormat::date_time: return s.at == kZulu || s.at == kOffsetEnd;
    case StringFormat::uuid: return s.at == 36;
    case StringFormat::ipv4: return s.at == 3 && s.aux > 0;
    case StringFormat::email: return s.at == 1 && s.field > 0 && s.last != '-' && s.wide >= 2;
    case StringFormat::duration: return s.aux == 0 && (s.at == 3 || ((s.at == 1 || s.at == 2) && s.field > 0));
    case StringFormat::none: return false;
  }
  return false;
}

}  // namespace attnzoo
