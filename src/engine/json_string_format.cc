#include "engine/json_string_format.h"

#include <algorithm>

namespace attnzoo {
namespace {

bool alnum(uint8_t b) { return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z'); }

bool atext(uint8_t b) {
  return alnum(b) || std::string_view("!#$%&'*+/=?^_`{|}~-").find(char(b)) != std::string_view::npos;
}

// The formats a DFA holds, as patterns (engine/json_string_pattern.h). Years 0001-9999; February 29 in the leap
// years: divisible by 4 but not by 100 (the last two digits), or by 400 (the first two, then "00").
const std::string kYear = R"((?:000[1-9]|00[1-9]\d|0[1-9]\d\d|[1-9]\d{3}))";
const std::string kLeapYear = R"((?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00))";
const std::string kDate = "(?:" + kYear +
                          R"(-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|)"
                          R"(02-(?:0[1-9]|1\d|2[0-8]))|)" +
                          kLeapYear + "-02-29)";
const std::string kTime = R"((?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d))";
const std::string kUuid = R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})";
const std::string kOctet = R"((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";
// Units in order, each right after the one before ("P1Y2M", not "P1Y2D"); numbers of 1-9 digits.
const std::string kNumber = R"(\d{1,9})";
const std::string kTimePart = "T(?:" + kNumber + "H(?:" + kNumber + "M(?:" + kNumber + "S)?)?|" + kNumber + "M(?:" +
                              kNumber + "S)?|" + kNumber + "S)";
const std::string kDuration = "P(?:" + kNumber + "W|(?:" + kNumber + "Y(?:" + kNumber + "M(?:" + kNumber + "D)?)?|" +
                              kNumber + "M(?:" + kNumber + "D)?|" + kNumber + "D)(?:" + kTimePart + ")?|" +
                              kTimePart + ")";

}  // namespace

// email: `at` 0 local part, 1 domain; `aux` the part's length; `field` the atom / label's; `wide` the domain's
// labels; `last` the byte before.
bool email_byte(EmailSoFar& s, uint8_t b) {
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

bool email_may_end(const EmailSoFar& s) { return s.at == 1 && s.field > 0 && s.last != '-' && s.wide >= 2; }

bool email_viable(const EmailSoFar& s, uint32_t len, uint32_t min, uint32_t max) {
  // Some completion adds e characters with min <= len + e <= max: e in [lo, hi], one of the intervals below.
  if (len > max) return false;
  const uint32_t lo = min > len ? min - len : 0, hi = max - len;
  const auto meets = [&](uint32_t a, uint32_t b) { return a <= b && a <= hi && b >= lo; };
  const uint32_t first = s.at == 0 ? s.field == 0 : s.field == 0 || s.last == '-';  // before it may stop
  if (s.at == 0)  // more of the local part (64 at most), "@", a domain of 3 to 253 characters
    return meets(first + 4, 64 - s.aux + 254);
  const uint32_t room = 253 - s.aux, label = 63 - s.field;
  // Close in this label (with two labels already), or "." and more labels after it (each 2 to 64 characters).
  return (s.wide >= 2 && meets(first, std::min(label, room))) || meets(first + 2, room);
}

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

std::shared_ptr<const StringPattern> format_pattern(StringFormat f) {
  // Compiled at first use, once per process (function-local statics), and shared by every schema.
  const auto compiled = [](const std::string& regex) {
    return std::make_shared<const StringPattern>(compile_string_pattern("^(?:" + regex + ")$", ""));
  };
  switch (f) {
    case StringFormat::date: {
      static const auto p = compiled(kDate);
      return p;
    }
    case StringFormat::time: {
      static const auto p = compiled(kTime);
      return p;
    }
    case StringFormat::date_time: {
      static const auto p = compiled(kDate + "T" + kTime);
      return p;
    }
    case StringFormat::uuid: {
      static const auto p = compiled(kUuid);
      return p;
    }
    case StringFormat::ipv4: {
      static const auto p = compiled(kOctet + R"((?:\.)" + kOctet + "){3}");
      return p;
    }
    case StringFormat::duration: {
      static const auto p = compiled(kDuration);
      return p;
    }
    case StringFormat::email:
    case StringFormat::none: break;
  }
  return nullptr;
}

}  // namespace attnzoo
