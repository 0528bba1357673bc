#pragma once
// A model's config.json with typed getters whose errors name the file and the key. Keys may be dotted paths
// into nested objects ("rope_scaling.factor"). A key whose value is JSON null counts as absent, since
// Hugging Face configs write null for "not used" (e.g. "sliding_window": null).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "loader/json.h"

namespace attnzoo {

class Config {
 public:
  // Reads and parses a file. Throws LoadError naming the path (missing, unreadable, invalid JSON, not an object).
  static Config load(const std::string& path);
  // `source` names the text in errors (usually the path).
  static Config parse(std::string_view text, const std::string& source);

  const std::string& source() const { return source_; }
  const json::Value& json() const { return *node_; }
  std::vector<std::string> keys() const;  // top-level keys of this (sub-)config, sorted

  bool has(std::string_view key) const;             // present and not null
  const json::Value* find(std::string_view key) const;  // nullptr when absent or null

  // Each getter throws LoadError "<source>: key '<key>': ..." when absent (non-_or forms) or of the wrong type.
  int64_t get_int(std::string_view key) const;       // integers, or floats with an exact integral value
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float(std::string_view key) const;      // any number
  double get_float_or(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key) const;
  bool get_bool_or(std::string_view key, bool fallback) const;
  std::string get_string(std::string_view key) const;
  std::string get_string_or(std::string_view key, std::string_view fallback) const;
  std::vector<int64_t> get_int_list(std::string_view key) const;
  std::vector<double> get_float_list(std::string_view key) const;
  std::vector<std::string> get_string_list(std::string_view key) const;

  // A nested object as a Config (errors then name "parent.child.key"). Throws when absent or not an object.
  Config sub(std::string_view key) const;
  // Multimodal wrappers (Gemma 3, Qwen-VL, Llama 4 ...) keep the language model's settings under "text_config".
  bool has_text_config() const { return has("text_config"); }
  Config text_config() const;  // that sub-config when present, else this config

  // The checkpoint dtype string: "dtype" (newer transformers) or else "torch_dtype", on this sub-config or else
  // on the file's top level; a "torch." prefix is dropped. Empty when neither key is set.
  std::string dtype() const;
  // dtype() as an attnzoo DType (float32/bfloat16/float16); `fallback` when unset. Throws for other dtypes.
  DType dtype_or(DType fallback) const;

 private:
  Config(std::shared_ptr<const json::Value> root, const json::Value* node, std::string source, std::string prefix);
  [[noreturn]] void fail(std::string_view key, const std::string& message) const;
  const json::Value& require(std::string_view key) const;

  std::shared_ptr<const json::Value> root_;
  const json::Value* node_;
  std::string source_;
  std::string prefix_;  // "text_config." for a sub-config, so errors name the full key
};

}  // namespace attnzoo
