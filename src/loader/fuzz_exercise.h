#pragma once
// What a fuzzer does with one input: parse it, and when it is accepted, touch everything the parser handed
// out (every tensor byte, every JSON node, every config getter) so a sanitizer sees any out-of-bounds read.
// Shared by the in-tree mutation fuzz test and the libFuzzer entry points in fuzz/.
// Contract: these return normally or throw LoadError (DTypeError for views of dtypes attnzoo lacks); any other
// exception or a crash is a bug.
#include <cstdint>
#include <vector>

#include "loader/config.h"
#include "loader/gguf.h"
#include "loader/gguf_checkpoint.h"
#include "loader/json.h"
#include "loader/safetensors.h"

namespace attnzoo::fuzzing {

inline uint64_t touch_json(const json::Value& v) {
  uint64_t h = uint64_t(v.kind());
  switch (v.kind()) {
    case json::Value::Kind::string:
      for (char c : v.as_string()) h = h * 31 + uint8_t(c);
      break;
    case json::Value::Kind::number: h += v.is_integer() ? uint64_t(v.as_int()) : uint64_t(v.as_double() != 0); break;
    case json::Value::Kind::array:
      for (const json::Value& e : v.as_array()) h = h * 7 + touch_json(e);
      break;
    case json::Value::Kind::object:
      for (const json::Member& m : v.as_object()) h = h * 5 + m.first.size() + touch_json(m.second);
      break;
    default: break;
  }
  return h;
}

// Returns true when the input was accepted.
inline bool exercise_safetensors(const uint8_t* data, size_t size) {
  SafetensorsFile f = SafetensorsFile::parse(MappedFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz"));
  const uint8_t* begin = f.mapping()->data();
  const uint8_t* end = begin + f.mapping()->size();
  volatile uint64_t sum = 0;
  for (const TensorInfo& t : f.tensors()) {
    const uint8_t* p = f.data(t.name);
    // Invariants the parser promises; a violation is a bug even when memory happens to be readable.
    if (p < begin || p + t.nbytes() > end || t.nbytes() != uint64_t(t.numel()) * file_dtype_size(t.dtype)) {
      __builtin_trap();
    }
    for (uint64_t i = 0; i < t.nbytes(); ++i) sum = sum + p[i];
    try {
      TensorView v = f.view(t.name);
      if (v.numel() != t.numel()) __builtin_trap();
    } catch (const DTypeError&) {
    } catch (const LoadError&) {
    }
  }
  for (const auto& [k, v] : f.metadata()) sum = sum + k.size() + v.size();
  return true;
}

inline uint64_t touch_gguf_value(const GgufValue& v) {
  uint64_t h = uint64_t(v.type()) + v.raw_bits();
  if (v.type() == GgufType::STRING) h += v.as_string("fuzz").size();
  if (!v.is_array()) return h;
  for (uint8_t b : v.packed()) h = h * 31 + b;
  for (const std::string& s : v.strings()) h = h * 7 + s.size();
  for (const GgufValue& a : v.arrays()) h = h * 5 + touch_gguf_value(a);
  if (v.size() > 0) h += v.at(v.size() - 1).raw_bits();
  return h;
}

inline bool exercise_gguf(const uint8_t* data, size_t size) {
  GgufFile f = GgufFile::parse(MappedFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf"));
  const uint8_t* begin = f.mapping()->data();
  const uint8_t* end = begin + f.mapping()->size();
  volatile uint64_t sum = 0;
  for (const auto& [key, v] : f.metadata()) sum = sum + key.size() + touch_gguf_value(v);
  for (const GgufTensor& t : f.tensors()) {
    // Invariants the parser promises; a violation is a bug even when memory happens to be readable.
    if (t.data < begin || t.bytes < 0 || t.bytes > end - t.data || t.offset % f.alignment() != 0 ||
        t.bytes != t.row_bytes() * (t.ne[0] ? t.numel() / t.ne[0] : 0)) {
      __builtin_trap();
    }
    for (int64_t i = 0; i < t.bytes; ++i) sum = sum + t.data[i];
  }
  // The Hugging Face view of an accepted file: config synthesis and name mapping answer or throw LoadError.
  try {
    sum = sum + gguf_hf_config_json(f).size();
  } catch (const LoadError&) {
  }
  try {
    for (const GgufHfTensor& t : gguf_hf_tensors(f)) {
      if (t.data < begin || t.bytes < 0 || t.bytes > end - t.data) __builtin_trap();
      if (t.bytes > 0) sum = sum + t.data[0] + t.data[t.bytes - 1];
      for (const GgufPiece& p : t.pieces)
        if (p.start < p.data || p.bytes < 0 || p.bytes > p.data + p.data_bytes - p.start || p.data < begin ||
            p.data_bytes > end - p.data)
          __builtin_trap();
      if (t.fix != GgufFix::none) sum = sum + undo_gguf_fix(t, "fuzz").bytes.size();
    }
  } catch (const LoadError&) {
  }
  return true;
}

inline bool exercise_json(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  json::Value v = json::parse(text);
  volatile uint64_t h = touch_json(v);
  (void)h;
  if (!v.is_object()) return true;
  // Every getter on every key: each must answer or throw LoadError, whatever the value's type.
  Config c = Config::parse(text, "fuzz.json");
  for (const std::string& key : c.keys()) {
    auto quiet = [](auto&& fn) {
      try {
        fn();
      } catch (const LoadError&) {
      }
    };
    quiet([&] { c.get_int(key); });
    quiet([&] { c.get_float(key); });
    quiet([&] { c.get_bool(key); });
    quiet([&] { c.get_string(key); });
    quiet([&] { c.get_int_list(key); });
    quiet([&] { c.get_float_list(key); });
    quiet([&] { c.get_string_list(key); });
    quiet([&] { c.sub(key).keys(); });
  }
  try {
    c.text_config().dtype_or(DType::f32);
  } catch (const LoadError&) {
  }
  return true;
}

}  // namespace attnzoo::fuzzing
