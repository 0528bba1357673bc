#include "engine/json_schema_recognizer.h"

#include <bit>

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

bool JsonSchemaRecognizer::free_key_text() const {
  return aux_ == 0 && node(frames_[depth_ - 1].node).keys == JsonSchema::kNone && other_key_from(frames_[depth_ - 1]);
}

size_t JsonSchemaRecognizer::string_room() const {
  const uint32_t max = key_ || mode_ == Mode::key_literal ? JsonSchema::kUnbounded : node(want_).max;
  return max == JsonSchema::kUnbounded ? SIZE_MAX : size_t(max - len_);
}

JsonSchemaRecognizer::PatternText JsonSchemaRecognizer::pattern_text() const {
  // Off the listed keys' trie a patterned key's byte only moves its DFA, as in a patterned string.
  if (mode_ == Mode::key_literal && lit_ == kOffTrie) {
    const uint16_t keys = node(frames_[depth_ - 1].node).keys;
    if (keys == JsonSchema::kNone || len_ == StringPattern::kDead) return {};
    return {&schema_->patterns[schema_->key_patterns[keys].pattern], uint16_t(len_), 0, nullptr};
  }
  if (mode_ != Mode::pattern) return {};
  const JsonSchema::Node& n = node(want_);
  return {&schema_->patterns[n.pattern], state_, len_,
          n.lengths == JsonSchema::kNone ? nullptr : &schema_->string_lengths[n.lengths]};
}

bool JsonSchemaRecognizer::whitespace() {
  if (ws_ >= kMaxWhitespace) return false;
  ++ws_;
  return true;
}

namespace {
// The required properties at index `from` and after.
int required_from(const JsonSchema::Node& n, uint32_t from) {
  return from >= 64 ? 0 : std::popcount(n.required >> from);
}
}  // namespace

uint64_t JsonSchemaRecognizer::keys_from(const Frame& f) const {
  // Properties come in the schema's order: any after the last one written, up to and including the first required
  // one (which may not be skipped), whose value still fits in the depth left; within maxProperties with the
  // required ones after it, and (minProperties) leaving enough keys to write after it.
  const auto& n = node(f.node);
  const uint32_t written = keys_written(f);
  const bool others = other_values_fit(n);  // unlisted keys can make up minProperties
  uint64_t out = 0;
  for (uint32_t i = next_index(f); i < n.num_properties; ++i) {
    bool ok = fits(schema_->properties[n.first_property + i].value) &&
              (n.max == JsonSchema::kUnbounded || written + 1 + uint32_t(required_from(n, i + 1)) <= n.max);
    if (ok && !others && written + 1 < n.min) {
      uint32_t after = 0;
      for (uint32_t j = i + 1; j < n.num_properties; ++j)
        after += fits(schema_->properties[n.first_property + j].value);
      ok = written + 1 + after >= n.min;
    }
    if (ok) out |= uint64_t(1) << i;
    if ((n.required >> i) & 1) break;
  }
  return out;
}

bool JsonSchemaRecognizer::other_values_fit(const JsonSchema::Node& n) const {
  // Every value an unlisted key may take must fit (a key's value is known only once it closes): no key is begun
  // into a dead end.
  const auto positions = schema_->other_key_positions(n);
  return !positions.empty() && std::all_of(positions.begin(), positions.end(), [&](uint16_t p) { return fits(p); });
}

bool JsonSchemaRecognizer::other_key_from(const Frame& f) const {
  const auto& n = node(f.node);
  return other_values_fit(n) &&
         (n.max == JsonSchema::kUnbounded ||
          keys_written(f) + 1 + uint32_t(required_from(n, next_index(f))) <= n.max);
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
      mode_ = Mode(uint8_t(Mode::minus) + uint8_t(number_start(b, len_)));
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
  if (n.keys != JsonSchema::kNone) {
    keys_ = n.kind == Kind::object ? keys_from(f) : 0;
    const bool others = other_key_from(f);
    if (!keys_ && !others) return false;
    lit_ = n.kind == Kind::object ? schema_->trie_child(n.trie, b) : kOffTrie;
    len_ = others ? schema_->patterns[schema_->key_patterns[n.keys].pattern]->start : StringPattern::kDead;
    mode_ = Mode::key_literal;
    aux_ = 0;
    return true;
  }
  if (n.kind == Kind::map) {
    if (!other_key_from(f)) return false;  // within maxProperties, and its value fits the depth left
    key_ = true, len_ = 0;
    mode_ = Mode::string;
    return true;
  }
  keys_ = keys_from(f);
  if (!keys_ && !other_key_from(f)) return false;
  lit_ = n.trie;
  mode_ = Mode::key_literal;
  aux_ = 0;
  if (!other_key_from(f)) return key_byte(b);
  lit_ = schema_->trie_child(n.trie, b);  // the opening quote (kOffTrie where no key is listed)
  return true;
}

bool JsonSchemaRecognizer::patterned_key_byte(uint8_t b) {
  // Two readings at once: a listed key on the trie (lit_, keys_), and another key in the key DFA (state in len_,
  // kDead once none can come of these bytes). A listed key matches no pattern (the compiler checked), so at the
  // closing quote at most one of them ends.
  Frame& f = frames_[depth_ - 1];
  const auto& n = node(f.node);
  const JsonSchema::KeyPattern& keys = schema_->key_patterns[n.keys];
  const StringPattern& dfa = *schema_->patterns[keys.pattern];
  const uint16_t state = uint16_t(len_);
  // The trie is followed as long as the bytes spell a listed name's prefix, written or not: a key that ends as a
  // listed name is that property (once, in its place), never another key.
  const uint32_t child = lit_ == kOffTrie ? kOffTrie : schema_->trie_child(lit_, b);
  if (b == '"') {
    if (const int32_t k = child == kOffTrie ? -1 : schema_->trie[child].terminal; k >= 0) {
      if (!((keys_ >> k) & 1)) return false;
      wrote_key(f, uint32_t(k + 1));
      want_ = schema_->properties[n.first_property + uint32_t(k)].value;
    } else if (state != StringPattern::kDead && dfa.accepting[state]) {
      wrote_key(f, next_index(f));
      want_ = keys.value[state];
    } else {
      return false;
    }
    mode_ = Mode::colon;
    return true;
  }
  const uint16_t next = state == StringPattern::kDead ? StringPattern::kDead : dfa.next[state][b];
  if (next == StringPattern::kDead && !(child != kOffTrie && (schema_->trie[child].mask & keys_))) return false;
  lit_ = child;
  len_ = next;
  return true;
}

bool JsonSchemaRecognizer::key_byte(uint8_t b) {
  if (node(frames_[depth_ - 1].node).keys != JsonSchema::kNone) return patterned_key_byte(b);
  Frame& f = frames_[depth_ - 1];
  const bool others = other_key_from(f);
  const uint32_t child = lit_ == kOffTrie ? kOffTrie : schema_->trie_child(lit_, b);
  if (child == kOffTrie || (!others && !(schema_->trie[child].mask & keys_))) {
    if (!others) return false;
    lit_ = kOffTrie;
    return other_key_byte(b);
  }
  const int32_t k = schema_->trie[child].terminal;
  if (k >= 0) {
    // A listed key's closing quote: once only, in its place; the object may write only later ones from here on.
    if (!((keys_ >> k) & 1)) return false;
    wrote_key(f, uint32_t(k + 1));
    want_ = schema_->properties[node(f.node).first_property + uint32_t(k)].value;
    mode_ = Mode::colon;
    return true;
  }
  // Still a listed key's prefix; where another key may leave the trie here, its characters must stay whole.
  if (others && !other_key_byte(b)) return false;
  lit_ = child;
  return true;
}

bool JsonSchemaRecognizer::other_key_byte(uint8_t b) {
  // Escapes only as json.dumps writes them (\" \\ \b \f \n \r \t, \u00xx in lower case for the other control
  // characters): then a key's text follows from its value, so one that spells a listed name's value spells its text,
  // which the trie holds. aux_ past kEscape: after the backslash, then each of \u's four digits.
  if (aux_ >= kEscape) {
    bool ok = false;
    switch (aux_ - kEscape) {
      case 0:
        ok = b == '"' || b == '\\' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't' || b == 'u';
        aux_ = b == 'u' ? kEscape + 1 : 0;
        break;
      case 1:
      case 2:
        ok = b == '0';
        ++aux_;
        break;
      case 3:
        ok = b == '0' || b == '1';
        lo_ = b == '0';
        ++aux_;
        break;
      default:  // \u0008 \u0009 \u000a \u000c \u000d have short forms
        ok = ((b >= '0' && b <= '9') || (b >= 'a' && b <= 'f')) &&
             !(lo_ && (b == '8' || b == '9' || b == 'a' || b == 'c' || b == 'd'));
        aux_ = 0;
    }
    return ok;
  }
  if (aux_ > 0) {  // a character's continuation bytes
    if (b < lo_ || b > hi_) return false;
    lo_ = 0x80, hi_ = 0xBF, --aux_;
    return true;
  }
  if (b == '\\') {
    aux_ = kEscape;
    return true;
  }
  if (b == '"') {
    if (lit_ != kOffTrie) return true;  // on the trie a quote is a listed key's (handled by key_byte)
    Frame& f = frames_[depth_ - 1];
    wrote_key(f, next_index(f));
    want_ = node(f.node).child;
    mode_ = Mode::colon;
    return true;
  }
  if (b < 0x20) return false;
  if (b < 0x80) return true;
  const Utf8Lead lead = utf8_lead(b);
  if (!lead.continuation) return false;
  aux_ = lead.continuation, lo_ = lead.lo, hi_ = lead.hi;
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
      Frame& f = frames_[depth_ - 1];
      wrote_key(f, 0);
      want_ = node(f.node).child;
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
  if (n.kind == Kind::object && !keys_from(f) && !other_key_from(f)) return false;  // no key left to write
  if (n.kind == Kind::map && !other_key_from(f)) return false;
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
    if (n.kind == Kind::object && required_from(n, next_index(f)) != 0) return false;  // required left
    if (keys_written(f) < n.min) return false;
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
        const uint16_t lengths = node(want_).lengths;
        if (b == '"') {
          ok = p.accepting[state_] && (lengths == JsonSchema::kNone || len_ >= node(want_).min) && end_value();
        } else {
          const uint16_t next = p.next[state_][b];
          // Characters as code points: every byte but a UTF-8 continuation begins one.
          const uint32_t len = len_ + (b < 0x80 || b >= 0xC0);
          ok = next != StringPattern::kDead &&
               (lengths == JsonSchema::kNone || schema_->string_lengths[lengths].viable(next, len));
          if (ok) state_ = next, len_ = len;
        }
        break;
      }
      case Mode::email: {
        // An email address is ASCII and written without escapes: a byte is a character.
        const JsonSchema::Node& n = node(want_);
        const bool bounded = n.min > 0 || n.max != JsonSchema::kUnbounded;
        if (b == '"') {
          ok = email_may_end(email_) && len_ >= n.min && end_value();
        } else {
          ok = email_byte(email_, b) && (!bounded || email_viable(email_, len_ + 1, n.min, n.max));
          len_ += ok;
        }
        break;
      }
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
        switch (number_byte(n, len_, b, integer_only)) {
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
