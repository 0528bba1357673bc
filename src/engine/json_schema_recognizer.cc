#include "engine/json_schema_recognizer.h"

#include "engine/json_lexeme.h"

namespace attnzoo {
namespace {

using namespace json_lexeme;
using Kind = JsonSchema::Kind;

}  // namespace

// Structured outputs copies the state per vocabulary trie edge: it stays a few cache lines.
static_assert(sizeof(JsonSchemaRecognizer) <= 168);

bool JsonSchemaRecognizer::complete() const {
  if (mode_ == Mode::done) return true;
  // A top-level number has no last byte of its own: it is whole when it may end and no byte may extend it (an
  // integer "0", or a bounded one that more digits would leave the range of).
  if (depth_ != 0 || mode_ < Mode::minus || mode_ > Mode::exponent_digits || !can_end()) return false;
  for (uint8_t b : std::string_view("0123456789.eE")) {
    JsonSchemaRecognizer next = *this;
    if (next.push(b)) return false;
  }
  return true;
}

bool JsonSchemaRecognizer::number_holds() const {
  const uint16_t b = node(want_).bounds;
  return b == JsonSchema::kNone || schema_->number_bounds[b].holds(num_);
}

bool JsonSchemaRecognizer::bounded_number_byte(uint8_t b, Mode m) {
  using Stage = NumberBounds::Stage;
  const NumberBounds& bounds = schema_->number_bounds[node(want_).bounds];
  if (is_digit(b)) number_digit(num_, m == Mode::fraction, uint8_t(b - '0'), bounds);
  const Stage stage = m == Mode::minus ? Stage::minus
                      : m == Mode::dot ? Stage::dot
                      : m == Mode::fraction ? Stage::fraction
                                            : Stage::whole;
  return bounds.viable(num_, stage, m == Mode::zero);
}

bool JsonSchemaRecognizer::can_end() const {
  if (mode_ == Mode::done) return true;
  if (depth_ != 0) return false;
  if (mode_ >= Mode::minus && mode_ <= Mode::exponent_digits)
    return number_may_end(Number(uint8_t(mode_) - uint8_t(Mode::minus))) && number_holds();
  return mode_ == Mode::literal && schema_->trie[lit_].terminal >= 0;
}

size_t JsonSchemaRecognizer::string_room() const {
  const uint32_t max = key_ ? JsonSchema::kUnbounded : node(want_).max;
  return max == JsonSchema::kUnbounded ? SIZE_MAX : size_t(max - len_);
}

bool JsonSchemaRecognizer::whitespace() {
  if (ws_ >= kMaxWhitespace) return false;
  ++ws_;
  return true;
}

uint64_t JsonSchemaRecognizer::keys_from(const Frame& f) const {
  // Properties come in the schema's order: any after the last one written, up to and including the first required
  // one (which may not be skipped), whose value still fits in the depth left.
  const auto& n = node(f.node);
  uint64_t out = 0;
  for (uint32_t i = f.count; i < n.num_properties; ++i) {
    if (fits(schema_->properties[n.first_property + i].value)) out |= uint64_t(1) << i;
    if ((n.required >> i) & 1) break;
  }
  return out;
}

bool JsonSchemaRecognizer::end_value() {
  mode_ = depth_ == 0 ? Mode::done : Mode::after_value;
  return true;
}

bool JsonSchemaRecognizer::after_scalar(uint8_t b) {
  // Nothing follows the top-level value (no trailing whitespace: the document ends with its last byte).
  if (depth_ == 0) return false;
  end_value();
  return push(b);
}

bool JsonSchemaRecognizer::begin_value(uint8_t b) {
  const uint16_t id = schema_->positions[want_].by_byte[b];
  if (id == JsonSchema::kNone || depth_ + schema_->node_need[id] > kMaxDepth) return false;
  const auto& n = node(id);
  switch (n.kind) {
    case Kind::object:
    case Kind::map:
    case Kind::array:
      frames_[depth_++] = {id, 0};
      mode_ = n.kind == Kind::array ? Mode::array_open : Mode::object_open;
      return true;
    case Kind::string:
      want_ = id, key_ = false, len_ = 0;
      mode_ = n.pattern != JsonSchema::kNone ? Mode::pattern : n.email ? Mode::email : Mode::string;
      if (n.pattern != JsonSchema::kNone) state_ = schema_->patterns[n.pattern]->start;
      if (n.email) email_ = EmailSoFar{};
      return true;
    case Kind::number:
    case Kind::integer:
      want_ = id;
      mode_ = b == '-' ? Mode::minus : b == '0' ? Mode::zero : Mode::integer;
      if (n.bounds == JsonSchema::kNone) return true;
      num_ = NumberSoFar{};
      num_.negative = b == '-';
      return bounded_number_byte(b, mode_);
    case Kind::literal:
      lit_ = n.trie;
      mode_ = Mode::literal;
      return literal_byte(b);
  }
  return false;
}

bool JsonSchemaRecognizer::begin_key(uint8_t b) {
  if (b != '"') return false;
  const Frame& f = frames_[depth_ - 1];
  const auto& n = node(f.node);
  if (n.kind == Kind::map) {
    key_ = true, len_ = 0;
    mode_ = Mode::string;
    return true;
  }
  keys_ = keys_from(f);
  if (!keys_) return false;
  lit_ = n.trie;
  mode_ = Mode::key_literal;
  return key_byte(b);
}

bool JsonSchemaRecognizer::key_byte(uint8_t b) {
  const uint32_t child = schema_->trie_child(lit_, b);
  if (child == JsonSchema::kUnbounded || !(schema_->trie[child].mask & keys_)) return false;
  lit_ = child;
  const int32_t k = schema_->trie[child].terminal;
  if (k >= 0) {
    // The key's closing quote: the object may write only later properties from here on.
    Frame& f = frames_[depth_ - 1];
    f.count = uint16_t(k + 1);
    want_ = schema_->properties[node(f.node).first_property + uint32_t(k)].value;
    mode_ = Mode::colon;
  }
  return true;
}

bool JsonSchemaRecognizer::literal_byte(uint8_t b) {
  const uint32_t child = schema_->trie_child(lit_, b);
  if (child == JsonSchema::kUnbounded) return schema_->trie[lit_].terminal >= 0 && after_scalar(b);
  lit_ = child;
  const auto& t = schema_->trie[child];
  if (t.terminal >= 0 && t.edges.empty()) {
    // A tagged union's tag: the rest of the object is the variant this value names.
    if (depth_ > 0) {
      Frame& f = frames_[depth_ - 1];
      const auto& n = node(f.node);
      if (n.num_variants) f.node = schema_->variants[n.first_variant + uint32_t(t.terminal)];
    }
    return end_value();
  }
  return true;
}

bool JsonSchemaRecognizer::string_char() {
  if (!key_ && len_ >= node(want_).max) return false;
  ++len_;
  return true;
}

bool JsonSchemaRecognizer::string_byte(uint8_t b) {
  if (b == '"') {
    if (key_) {
      key_ = false;
      want_ = node(frames_[depth_ - 1].node).child;
      mode_ = Mode::colon;
      return true;
    }
    return len_ >= node(want_).min && end_value();
  }
  if (b == '\\') {
    mode_ = Mode::escape;
    return string_char();
  }
  if (b < 0x20) return false;
  if (b < 0x80) return string_char();
  const Utf8Lead lead = utf8_lead(b);
  if (!lead.continuation) return false;
  aux_ = lead.continuation, lo_ = lead.lo, hi_ = lead.hi;
  mode_ = Mode::utf8;
  return string_char();
}

bool JsonSchemaRecognizer::next_item() {
  Frame& f = frames_[depth_ - 1];
  const auto& n = node(f.node);
  if (f.count >= n.max) return false;
  // A tuple's (prefixItems) first items have their own positions; later ones are `items`.
  want_ = f.count < n.num_properties ? schema_->properties[n.first_property + f.count].value : n.child;
  ++f.count;
  return true;
}

bool JsonSchemaRecognizer::comma() {
  Frame& f = frames_[depth_ - 1];
  const auto& n = node(f.node);
  if (n.kind == Kind::array) {
    if (!next_item()) return false;
    mode_ = Mode::value;
    return true;
  }
  if (n.kind == Kind::object && !keys_from(f)) return false;  // no property left to write
  mode_ = Mode::key;
  return true;
}

bool JsonSchemaRecognizer::close(uint8_t b) {
  const Frame& f = frames_[depth_ - 1];
  const auto& n = node(f.node);
  if (b == ']') {
    if (n.kind != Kind::array || f.count < n.min) return false;
  } else {
    if (n.kind == Kind::array) return false;
    if (n.kind == Kind::object && f.count < 64 && (n.required >> f.count) != 0) return false;  // required left
  }
  --depth_;
  return end_value();
}

bool JsonSchemaRecognizer::push(uint8_t b) {
  const JsonSchemaRecognizer saved = *this;
  const Mode m = mode_;
  const bool between_tokens = m == Mode::value || m == Mode::object_open || m == Mode::key || m == Mode::colon ||
                              m == Mode::after_value || m == Mode::array_open;
  bool ok = false;
  if (between_tokens && is_ws(b)) {
    ok = whitespace();
  } else {
    if (between_tokens) ws_ = 0;
    const bool integer_only = m >= Mode::minus && m <= Mode::exponent_digits && node(want_).kind == Kind::integer;
    switch (m) {
      case Mode::value: ok = begin_value(b); break;
      case Mode::object_open: ok = b == '}' ? close(b) : begin_key(b); break;
      case Mode::key: ok = begin_key(b); break;
      case Mode::key_literal: ok = key_byte(b); break;
      case Mode::colon:
        ok = b == ':';
        if (ok) mode_ = Mode::value;
        break;
      case Mode::after_value: ok = b == ',' ? comma() : (b == '}' || b == ']') && close(b); break;
      case Mode::array_open: {
        if (b == ']') {
          ok = close(b);
          break;
        }
        ok = next_item() && begin_value(b);
        break;
      }
      case Mode::string: ok = string_byte(b); break;
      case Mode::pattern: {
        const StringPattern& p = *schema_->patterns[node(want_).pattern];
        if (b == '"') {
          ok = p.accepting[state_] && end_value();
        } else {
          const uint16_t next = p.next[state_][b];
          ok = next != StringPattern::kDead;
          if (ok) state_ = next;
        }
        break;
      }
      case Mode::email: ok = b == '"' ? email_may_end(email_) && end_value() : email_byte(email_, b); break;
      case Mode::escape:
        switch (escape_byte(b)) {
          case Escape::unicode: mode_ = Mode::unicode, aux_ = 4, ok = true; break;
          case Escape::done: mode_ = Mode::string, ok = true; break;
          case Escape::refused: break;
        }
        break;
      case Mode::unicode: {
        ok = is_hex(b);
        // In a length-bounded string a surrogate escape (\uD800-\uDFFF) is refused: a pair is one character.
        const bool bounded = !key_ && node(want_).max != JsonSchema::kUnbounded;
        if (ok && bounded && aux_ == 4) lo_ = b == 'd' || b == 'D';
        if (ok && bounded && aux_ == 3 && lo_ && !(b >= '0' && b <= '7')) ok = false;
        if (ok && --aux_ == 0) mode_ = Mode::string;
        break;
      }
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
        const bool bounded = node(want_).bounds != JsonSchema::kNone;
        if (bounded && (b == 'e' || b == 'E')) break;  // no exponent beside bounds
        switch (number_byte(n, b, integer_only)) {
          case NumberStep::kept:
            mode_ = Mode(uint8_t(Mode::minus) + uint8_t(n));
            ok = !bounded || bounded_number_byte(b, mode_);
            break;
          case NumberStep::ended: ok = number_holds() && after_scalar(b); break;
          case NumberStep::refused: break;
        }
        break;
      }
      case Mode::literal: ok = literal_byte(b); break;
      case Mode::done: ok = false; break;
    }
  }
  if (!ok) *this = saved;
  return ok;
}

}  // namespace attnzoo
