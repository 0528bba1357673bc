#pragma once
// Test helper: a GGUF writer that lays the format out by hand from a plain spec, so tests can write valid files
// and, by editing the spec or the bytes, every kind of broken one.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace attnzoo::testing {

using Bytes = std::vector<uint8_t>;

template <typename T>
void put(Bytes& b, T v) {
  const size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &v, sizeof(T));
}

inline void put_string(Bytes& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

struct GgufKvSpec {
  std::string key;
  uint32_t type;  // GgufType id
  Bytes value;    // encoded as the file stores it
};

struct GgufTensorSpec {
  std::string name;
  std::vector<uint64_t> ne;  // ggml order
  uint32_t type;             // ggml type id
  Bytes data;
  std::optional<uint64_t> offset;  // when set, written instead of the laid-out offset
};

struct GgufSpec {
  uint32_t version = 3;
  std::optional<uint64_t> tensor_count;  // when set, written instead of tensors.size()
  std::optional<uint64_t> kv_count;
  uint64_t alignment = 32;  // the layout's alignment (add a general.alignment key to match when not 32)
  std::vector<GgufKvSpec> kvs;
  std::vector<GgufTensorSpec> tensors;
};

template <typename T>
GgufKvSpec kv_scalar(std::string key, uint32_t type, T v) {
  GgufKvSpec kv{std::move(key), type, {}};
  put(kv.value, v);
  return kv;
}

inline GgufKvSpec kv_string(std::string key, const std::string& s) {
  GgufKvSpec kv{std::move(key), 8, {}};
  put_string(kv.value, s);
  return kv;
}

// An array value: element type, count and the encoded elements.
inline Bytes array_value(uint32_t elem_type, uint64_t count, const Bytes& elems) {
  Bytes b;
  put<uint32_t>(b, elem_type);
  put<uint64_t>(b, count);
  b.insert(b.end(), elems.begin(), elems.end());
  return b;
}

inline GgufKvSpec kv_array(std::string key, uint32_t elem_type, uint64_t count, const Bytes& elems) {
  return {std::move(key), 9, array_value(elem_type, count, elems)};
}

inline Bytes gguf_bytes(const GgufSpec& s) {
  Bytes b;
  put<uint32_t>(b, 0x46554747);
  put<uint32_t>(b, s.version);
  put<uint64_t>(b, s.tensor_count.value_or(s.tensors.size()));
  put<uint64_t>(b, s.kv_count.value_or(s.kvs.size()));
  for (const GgufKvSpec& kv : s.kvs) {
    put_string(b, kv.key);
    put<uint32_t>(b, kv.type);
    b.insert(b.end(), kv.value.begin(), kv.value.end());
  }
  uint64_t offset = 0;
  auto aligned = [&](uint64_t n) { return (n + s.alignment - 1) / s.alignment * s.alignment; };
  std::vector<uint64_t> offsets;
  for (const GgufTensorSpec& t : s.tensors) {
    put_string(b, t.name);
    put<uint32_t>(b, uint32_t(t.ne.size()));
    for (uint64_t d : t.ne) put<uint64_t>(b, d);
    put<uint32_t>(b, t.type);
    offsets.push_back(offset);  // the data goes here even when the header says otherwise
    put<uint64_t>(b, t.offset.value_or(offset));
    offset = aligned(offset + t.data.size());
  }
  const size_t data_start = aligned(b.size());
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    const Bytes& d = s.tensors[i].data;
    if (d.empty()) continue;
    if (b.size() < data_start + offsets[i] + d.size()) b.resize(data_start + offsets[i] + d.size());
    std::memcpy(b.data() + data_start + offsets[i], d.data(), d.size());
  }
  if (b.size() < data_start) b.resize(data_start);
  return b;
}

}  // namespace attnzoo::testing
