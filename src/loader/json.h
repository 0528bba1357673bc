#pragma once
// A small strict JSON parser (RFC 8259) for files we do not trust: config.json, safetensors headers, shard
// indexes. Strict means: UTF-8 validated, no trailing commas/comments/NaN, duplicate object keys rejected, nesting
// depth bounded, and every error carries the byte offset where parsing stopped.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loader/load_error.h"

namespace attnzoo::json {

struct ParseError : LoadError {
  ParseError(size_t offset, const std::string& message);
  size_t offset;       // byte offset into the parsed text
  std::string detail;  // the message without the offset
  bool value_limit = false;  // the document has more values than ParseOptions::max_values (not a flaw of the text)
};

class Value;
using Array = std::vector<Value>;
using Member = std::pair<std::string, Value>;
using Object = std::vector<Member>;  // sorted by key, keys unique (lookups are binary searches)

class Value {
 public:
  enum class Kind : uint8_t { null, boolean, number, string, array, object };

  Value() = default;
  static Value make_bool(bool b);
  // float_literal: the text had a fraction or an exponent.
  static Value make_number(double d, bool integral, int64_t i, bool float_literal = false);
  static Value make_string(std::string s);
  static Value make_array(Array a);
  static Value make_object(Object o);  // sorts; the caller guarantees unique keys

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::null; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_number() const { return kind_ == Kind::number; }
  // True for a number whose value is an exact int64: an integer literal in range, or a literal such as 2.0 /
  // 1e3 whose value is integral and at most 2^53 in magnitude (so no rounding happened on the way in).
  bool is_integer() const { return kind_ == Kind::number && integral_; }
  // True for a number written with a fraction or an exponent (2.0, 1e3): Python's json reads those as float.
  bool is_float_literal() const { return kind_ == Kind::number && float_literal_; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_array() const { return kind_ == Kind::array; }
  bool is_object() const { return kind_ == Kind::object; }

  // Accessors throw LoadError when the kind does not match (messages say what was found).
  bool as_bool() const;
  double as_double() const;
  int64_t as_int() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;

  // Object member lookup; nullptr when absent or when this is not an object.
  const Value* find(std::string_view key) const;
  // The object's members in the order make_object received them (the file's order, for parsed text).
  std::vector<const Member*> members_in_source_order() const;

 private:
  Kind kind_ = Kind::null;
  bool bool_ = false;
  bool integral_ = false;
  bool float_literal_ = false;
  int64_t int_ = 0;
  double double_ = 0;
  std::string string_;
  Array array_;
  Object object_;
  std::vector<uint32_t> source_order_;  // source_order_[k]: index in object_ of the k-th member received
};

const char* kind_name(Value::Kind k);

struct ParseOptions {
  int max_depth = 256;             // arrays + objects open at once
  int64_t max_values = 1 << 23;    // values in the document (8M: a 300k-token tokenizer has about 1M)
};

// Parses exactly one JSON value surrounded by optional whitespace. Throws ParseError.
Value parse(std::string_view text, ParseOptions options = {});

// `s` as a JSON string literal, escaped as Python's json.dumps(ensure_ascii=False) does; bytes that are not valid
// UTF-8 become U+FFFD (json_writer.cc).
std::string quote(std::string_view s);

}  // namespace attnzoo::json
