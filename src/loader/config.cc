#include "loader/config.h"

#include "loader/config_limits.h"
#include "loader/mapped_file.h"

namespace attnzoo {

Config::Config(std::shared_ptr<const json::Value> root, const json::Value* node, std::string source, std::string prefix)
    : root_(std::move(root)), node_(node), source_(std::move(source)), prefix_(std::move(prefix)) {}

Config Config::load(const std::string& path) {
  const auto file = MappedFile::open(path, kMaxConfigJsonBytes);
  return parse(std::string_view(reinterpret_cast<const char*>(file->data()), file->size()), path);
}

Config Config::parse(std::string_view text, const std::string& source) {
  auto root = std::make_shared<json::Value>();
  try {
    *root = json::parse(text);
  } catch (const json::ParseError& e) {
    throw LoadError(source + ": " + e.what());
  }
  if (!root->is_object()) {
    throw LoadError(source + ": top level is a JSON " + json::kind_name(root->kind()) + ", expected an object");
  }
  check_config_limits(*root, source);
  const json::Value* node = root.get();
  return Config(std::move(root), node, source, "");
}

std::vector<std::string> Config::keys() const {
  std::vector<std::string> out;
  for (const json::Member& m : node_->as_object()) out.push_back(m.first);
  return out;
}

void Config::fail(std::string_view key, const std::string& message) const {
  throw LoadError(source_ + ": key '" + prefix_ + std::string(key) + "': " + message);
}

const json::Value* Config::find(std::string_view key) const {
  const json::Value* v = node_;
  size_t start = 0;
  for (;;) {
    size_t dot = key.find('.', start);
    std::string_view part = key.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    v = v->find(part);  // nullptr when v is not an object
    if (!v) return nullptr;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return v->is_null() ? nullptr : v;
}

bool Config::has(std::string_view key) const { return find(key) != nullptr; }

const json::Value& Config::require(std::string_view key) const {
  const json::Value* v = find(key);
  if (!v) fail(key, "missing");
  return *v;
}

namespace {
std::string found(const json::Value& v) { return std::string("found a JSON ") + json::kind_name(v.kind()); }
}  // namespace

int64_t Config::get_int(std::string_view key) const {
  const json::Value& v = require(key);
  if (!v.is_number()) fail(key, "expected an integer, " + found(v));
  if (!v.is_integer()) fail(key, "expected an integer, found " + std::to_string(v.as_double()));
  return v.as_int();
}

int64_t Config::get_int_or(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double Config::get_float(std::string_view key) const {
  const json::Value& v = require(key);
  if (!v.is_number()) fail(key, "expected a number, " + found(v));
  return v.as_double();
}

double Config::get_float_or(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

bool Config::get_bool(std::string_view key) const {
  const json::Value& v = require(key);
  if (!v.is_bool()) fail(key, "expected true or false, " + found(v));
  return v.as_bool();
}

bool Config::get_bool_or(std::string_view key, bool fallback) const { return has(key) ? get_bool(key) : fallback; }

std::string Config::get_string(std::string_view key) const {
  const json::Value& v = require(key);
  if (!v.is_string()) fail(key, "expected a string, " + found(v));
  return v.as_string();
}

std::string Config::get_string_or(std::string_view key, std::string_view fallback) const {
  return has(key) ? get_string(key) : std::string(fallback);
}

std::vector<int64_t> Config::get_int_list(std::string_view key) const {
  const json::Value& v = require(key);
  if (!v.is_array()) fail(key, "expected a list of integers, " + found(v));
  std::vector<int64_t> out;
  for (const json::Value& e : v.as_array()) {
    if (!e.is_integer()) fail(key, "expected a list of integers, item " + std::to_string(out.size()) + " is not");
    out.push_back(e.as_int());
  }
  return out;
}

std::vector<double> Config::get_float_list(std::string_view key) const {
  const json::Value& v = require(key);
  if (!v.is_array()) fail(key, "expected a list of numbers, " + found(v));
  std::vector<double> out;
  for (const json::Value& e : v.as_array()) {
    if (!e.is_number()) fail(key, "expected a list of numbers, item " + std::to_string(out.size()) + " is not");
    out.push_back(e.as_double());
  }
  return out;
}

std::vector<std::string> Config::get_string_list(std::string_view key) const {
  const json::Value& v = require(key);
  if (!v.is_array()) fail(key, "expected a list of strings, " + found(v));
  std::vector<std::string> out;
  for (const json::Value& e : v.as_array()) {
    if (!e.is_string()) fail(key, "expected a list of strings, item " + std::to_string(out.size()) + " is not");
    out.push_back(e.as_string());
  }
  return out;
}

Config Config::sub(std::string_view key) const {
  const json::Value& v = require(key);
  if (!v.is_object()) fail(key, "expected an object, " + found(v));
  return Config(root_, &v, source_, prefix_ + std::string(key) + ".");
}

Config Config::text_config() const { return has_text_config() ? sub("text_config") : *this; }

std::string Config::dtype() const {
  for (const json::Value* node : {node_, root_.get()}) {
    for (const char* key : {"dtype", "torch_dtype"}) {
      const json::Value* v = node->find(key);
      if (!v || v->is_null()) continue;
      if (!v->is_string()) {
        throw LoadError(source_ + ": key '" + key + "': expected a dtype string, " + found(*v));
      }
      std::string s = v->as_string();
      if (s.rfind("torch.", 0) == 0) s = s.substr(6);
      return s;
    }
  }
  return "";
}

DType Config::dtype_or(DType fallback) const {
  const std::string s = dtype();
  if (s.empty()) return fallback;
  if (s == "float32" || s == "float") return DType::f32;
  if (s == "bfloat16") return DType::bf16;
  if (s == "float16" || s == "half") return DType::f16;
  throw LoadError(source_ + ": dtype '" + s + "' is not a float32/bfloat16/float16 checkpoint dtype");
}

}  // namespace attnzoo
