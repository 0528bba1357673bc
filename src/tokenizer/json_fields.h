#pragma once
// Reading tokenizer.json, a file we do not trust: every accessor names the file and the field path
// ("tokenizer.json: model.merges[3]: ...") in the LoadError it throws, so a bad file says where it is bad.
#include <cstdint>
#include <string>
#include <string_view>

#include "loader/json.h"
#include "loader/load_error.h"

namespace attnzoo::tok {

class JsonFields {
 public:
  explicit JsonFields(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }

  [[noreturn]] void fail(const std::string& path, const std::string& message) const {
    throw LoadError(file_ + ": " + path + ": " + message);
  }

  // The member, which must exist (null allowed).
  const json::Value& member(const json::Value& object, std::string_view key, const std::string& path) const {
    if (!object.is_object()) fail(path, std::string("expected an object, found ") + json::kind_name(object.kind()));
    const json::Value* v = object.find(key);
    if (!v) fail(join(path, key), "missing");
    return *v;
  }
  // The member when present and not null, else nullptr.
  const json::Value* optional(const json::Value& object, std::string_view key) const {
    const json::Value* v = object.is_object() ? object.find(key) : nullptr;
    return v && !v->is_null() ? v : nullptr;
  }

  const json::Value& object(const json::Value& v, const std::string& path) const { return expect(v, json::Value::Kind::object, path); }
  const json::Value& array(const json::Value& v, const std::string& path) const { return expect(v, json::Value::Kind::array, path); }
  const std::string& string(const json::Value& v, const std::string& path) const {
    return expect(v, json::Value::Kind::string, path).as_string();
  }
  bool boolean(const json::Value& v, const std::string& path) const {
    return expect(v, json::Value::Kind::boolean, path).as_bool();
  }
  int64_t integer(const json::Value& v, const std::string& path, int64_t lo, int64_t hi) const {
    if (!v.is_integer()) fail(path, std::string("expected an integer, found ") + json::kind_name(v.kind()));
    const int64_t i = v.as_int();
    if (i < lo || i > hi) fail(path, std::to_string(i) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return i;
  }

  // Optional members with defaults (null counts as absent, as serde's Option does).
  bool bool_or(const json::Value& object, std::string_view key, const std::string& path, bool fallback) const {
    const json::Value* v = optional(object, key);
    return v ? boolean(*v, join(path, key)) : fallback;
  }
  std::string string_or(const json::Value& object, std::string_view key, const std::string& path,
                        std::string fallback) const {
    const json::Value* v = optional(object, key);
    return v ? string(*v, join(path, key)) : fallback;
  }
  const std::string& type_of(const json::Value& component, const std::string& path) const {
    return string(member(component, "type", path), join(path, "type"));
  }

  static std::string join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }
  static std::string index(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

 private:
  const json::Value& expect(const json::Value& v, json::Value::Kind kind, const std::string& path) const {
    if (v.kind() != kind)
      fail(path, std::string("expected ") + (kind == json::Value::Kind::object || kind == json::Value::Kind::array ? "an " : "a ") + json::kind_name(kind) +
                     ", found " + json::kind_name(v.kind()));
    return v;
  }

  std::string file_;
};

}  // namespace attnzoo::tok
