#include "engine/json_recognizer.h"

#include "engine/json_lexeme.h"

namespace attnzoo {
namespace {

using namespace json_lexeme;

constexpr std::string_view kLiterals[] = {"true", "false", "null"};

}  // namespace

bool JsonRecognizer::whitespace() {
  if (ws_ >= kMaxWhitespace) return false;
  ++ws_;
  return true;
}

bool JsonRecognizer::open(bool object) {
  if (depth_ >= kMaxDepth) return false;
  if (object)
    stack_ |= uint64_t(1) << depth_;
  else
    stack_ &= ~(uint64_t(1) << depth_);
  ++depth_;
  mode_ = object ? Mode::object_open : Mode::array_open;
  return true;
}

bool JsonRecognizer::close(bool object) {
  if (depth_ == 0 || bool((stack_ >> (depth_ - 1)) & 1) != object) return false;
  --depth_;
  return end_value();
}

bool JsonRecognizer::end_value() {
  mode_ = depth_ == 0 ? Mode::done : Mode::after_value;
  return true;
}

bool JsonRecognizer::begin_value(uint8_t b) {
  switch (b) {
    case '{': return open(true);
    case '[': return open(false);
    case '"':
      mode_ = Mode::string;
      key_ = false;
      return true;
    case 't': case 'f': case 'n':
      mode_ = Mode::literal;
      literal_ = b == 't' ? 0 : b == 'f' ? 1 : 2;
      aux_ = 1;
      return true;
    default:
      if (b == '-' || is_digit(b)) {
        mode_ = Mode(uint8_t(Mode::minus) + uint8_t(number_start(b, digits_)));
        return true;
      }
      return false;
  }
}

bool JsonRecognizer::after_number(uint8_t b) {
  mode_ = Mode::after_value;
  return push(b);
}

bool JsonRecognizer::string_byte(uint8_t b) {
  if (b == '"') {
    if (key_) {
      mode_ = Mode::colon;
      return true;
    }
    return end_value();
  }
  if (b == '\\') {
    mode_ = Mode::escape;
    return true;
  }
  if (b < 0x20) return false;
  if (b < 0x80) return true;
  const Utf8Lead lead = utf8_lead(b);
  if (!lead.continuation) return false;
  aux_ = lead.continuation, lo_ = lead.lo, hi_ = lead.hi;
  mode_ = Mode::utf8;
  return true;
}

bool JsonRecognizer::push(uint8_t b) {
  const JsonRecognizer saved = *this;
  const bool ws = is_ws(b);
  const Mode m = mode_;
  bool ok = false;
  const bool between_tokens = m == Mode::start || m == Mode::object_open || m == Mode::key || m == Mode::colon ||
                              m == Mode::value || m == Mode::array_open || m == Mode::after_value;
  if (between_tokens && ws) {
    ok = whitespace();
  } else {
    if (between_tokens) ws_ = 0;
    switch (m) {
      case Mode::start: ok = b == '{' && open(true); break;
      case Mode::object_open:
        if (b == '}') {
          ok = close(true);
          break;
        }
        [[fallthrough]];
      case Mode::key:
        ok = b == '"';
        if (ok) mode_ = Mode::string, key_ = true;
        break;
      case Mode::colon:
        ok = b == ':';
        if (ok) mode_ = Mode::value;
        break;
      case Mode::array_open:
        if (b == ']') {
          ok = close(false);
          break;
        }
        [[fallthrough]];
      case Mode::value: ok = begin_value(b); break;
      case Mode::after_value: {
        const bool in_object = (stack_ >> (depth_ - 1)) & 1;
        if (b == ',') {
          mode_ = in_object ? Mode::key : Mode::value;
          ok = true;
        } else if (b == '}' || b == ']') {
          ok = close(b == '}');
        }
        break;
      }
      case Mode::string: ok = string_byte(b); break;
      case Mode::escape:
        switch (escape_byte(b)) {
          case Escape::unicode: mode_ = Mode::unicode, aux_ = 4, ok = true; break;
          case Escape::done: mode_ = Mode::string, ok = true; break;
          case Escape::refused: break;
        }
        break;
      case Mode::unicode:
        ok = is_hex(b);
        if (ok && --aux_ == 0) mode_ = Mode::string;
        break;
      case Mode::utf8:
        ok = b >= lo_ && b <= hi_;
        if (ok) {
          lo_ = 0x80, hi_ = 0xBF;
          if (--aux_ == 0) mode_ = Mode::string;
        }
        break;
      case Mode::minus:
      case Mode::zero:
      case Mode::integer:
      case Mode::dot:
      case Mode::fraction:
      case Mode::exponent:
      case Mode::exponent_sign:
      case Mode::exponent_digits: {
        // A number's modes are json_lexeme::Number's states in order: they convert by an offset.
        static_assert(uint8_t(Mode::exponent_digits) - uint8_t(Mode::minus) == uint8_t(Number::exponent_digits));
        Number n = Number(uint8_t(m) - uint8_t(Mode::minus));
        switch (number_byte(n, digits_, b, /*integer_only=*/false)) {
          case NumberStep::kept: mode_ = Mode(uint8_t(Mode::minus) + uint8_t(n)), ok = true; break;
          case NumberStep::ended: ok = after_number(b); break;
          case NumberStep::refused: break;
        }
        break;
      }
      case Mode::literal: {
        const std::string_view word = kLiterals[literal_];
        ok = b == uint8_t(word[aux_]);
        if (ok && ++aux_ == word.size()) ok = end_value();
        break;
      }
      case Mode::done: ok = false; break;
    }
  }
  if (!ok) *this = saved;
  return ok;
}

}  // namespace attnzoo
