#pragma once
// Test helpers for the loader: a minimal safetensors writer (the format written out by hand, so tests can also
// produce broken files on purpose) and a scratch directory removed at scope exit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "loader/load_error.h"

namespace attnzoo::testing {

// The message of the LoadError fn throws (a test failure, and "", when it throws none).
inline std::string load_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const LoadError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no LoadError";
  return "";
}

struct RawTensor {
  std::string name;
  std::string dtype;  // the format's spelling: "F32", "BF16" ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

template <typename T>
RawTensor raw_tensor(std::string name, std::string dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  RawTensor t{std::move(name), std::move(dtype), std::move(shape), {}};
  t.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

inline std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The header JSON for tensors laid out back to back in order, as the reference writer does.
inline std::string safetensors_header(const std::vector<RawTensor>& tensors,
                                      const std::map<std::string, std::string>& metadata = {}) {
  std::string h = "{";
  bool first = true;
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    for (auto it = metadata.begin(); it != metadata.end(); ++it) {
      if (it != metadata.begin()) h += ",";
      h += json_quote(it->first) + ":" + json_quote(it->second);
    }
    h += "}";
    first = false;
  }
  uint64_t offset = 0;
  for (const RawTensor& t : tensors) {
    if (!first) h += ",";
    first = false;
    h += json_quote(t.name) + ":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) h += (i ? "," : "") + std::to_string(t.shape[i]);
    h += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.bytes.size()) + "]}";
    offset += t.bytes.size();
  }
  return h + "}";
}

// A complete file from a header (padded with spaces to a multiple of 8, as the reference writer does) and data.
inline std::vector<uint8_t> safetensors_bytes(std::string header, const std::vector<uint8_t>& data) {
  while (header.size() % 8) header += ' ';
  const uint64_t n = header.size();
  std::vector<uint8_t> out(8 + header.size() + data.size());
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

inline std::vector<uint8_t> safetensors_bytes(const std::vector<RawTensor>& tensors,
                                              const std::map<std::string, std::string>& metadata = {}) {
  std::vector<uint8_t> data;
  for (const RawTensor& t : tensors) data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  return safetensors_bytes(safetensors_header(tensors, metadata), data);
}

inline void write_file(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("attnzoo_loader_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace attnzoo::testing
