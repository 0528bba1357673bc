#include "loader/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <memory>

#include "core/checked.h"
#include "core/error.h"
#include "loader/load_error.h"

namespace attnzoo {
namespace {

template <typename T>
void put(std::vector<uint8_t>& b, T v) {
  const size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

// A value's encoding after its type tag; an array's elements carry no tag of their own (its element type says).
void put_value(std::vector<uint8_t>& b, const GgufValue& v) {
  if (v.type() == GgufType::STRING) {
    put_string(b, v.as_string("GGUF metadata"));
  } else if (v.is_array()) {
    put<uint32_t>(b, uint32_t(v.elem_type()));
    put<uint64_t>(b, v.size());
    if (v.elem_type() == GgufType::STRING) {
      for (const std::string& s : v.strings()) put_string(b, s);
    } else if (v.elem_type() == GgufType::ARRAY) {
      for (const GgufValue& a : v.arrays()) put_value(b, a);
    } else {
      b.insert(b.end(), v.packed().begin(), v.packed().end());
    }
  } else {
    const uint64_t bits = v.raw_bits();  // little-endian: the scalar's bytes are the low ones
    const auto* p = reinterpret_cast<const uint8_t*>(&bits);
    b.insert(b.end(), p, p + gguf_scalar_size(v.type()));
  }
}

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
  // Readers take general.alignment as a u32 (llama.cpp caps it at 2^31): a larger one would be written truncated.
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > (uint64_t(1) << 31))
    throw ArgumentError("alignment: expected a power of two in [1, 2^31], got " + std::to_string(alignment));
  if (alignment != 32) add_u32("general.alignment", uint32_t(alignment));
}

bool GgufWriter::has_key(const std::string& key) const {
  for (const auto& kv : kvs_)
    if (kv.first == key) return true;
  return false;
}

std::optional<int64_t> GgufWriter::first_int(const std::string& key) const {
  for (const auto& [k, b] : kvs_) {
    if (k != key) continue;
    uint32_t type = 0;
    std::memcpy(&type, b.data(), sizeof type);
    size_t at = sizeof type;
    if (GgufType(type) == GgufType::ARRAY) {  // element type, count, then the packed elements
      uint64_t count = 0;
      std::memcpy(&type, b.data() + at, sizeof type);
      std::memcpy(&count, b.data() + at + sizeof type, sizeof count);
      if (count == 0) return std::nullopt;
      at += sizeof type + sizeof count;
    }
    const GgufType t = GgufType(type);
    auto read = [&](auto v) {
      std::memcpy(&v, b.data() + at, sizeof v);
      return int64_t(v);
    };
    switch (t) {
      case GgufType::U8: return read(uint8_t{});
      case GgufType::I8: return read(int8_t{});
      case GgufType::U16: return read(uint16_t{});
      case GgufType::I16: return read(int16_t{});
      case GgufType::U32: return read(uint32_t{});
      case GgufType::I32: return read(int32_t{});
      case GgufType::U64: return read(uint64_t{});
      case GgufType::I64: return read(int64_t{});
      default: return std::nullopt;
    }
  }
  return std::nullopt;
}

void GgufWriter::add_raw(const std::string& key, GgufType type, std::vector<uint8_t> value) {
  if (key.empty()) throw ArgumentError("GGUF metadata: empty key");
  if (has_key(key)) throw ArgumentError("GGUF metadata: key '" + key + "' set twice");
  std::vector<uint8_t> b;
  put<uint32_t>(b, uint32_t(type));
  b.insert(b.end(), value.begin(), value.end());
  kvs_.emplace_back(key, std::move(b));
}

#define ATTNZOO_GGUF_SCALAR(fn, T, tag)                  \
  void GgufWriter::fn(const std::string& key, T v) {     \
    std::vector<uint8_t> b;                              \
    put<T>(b, v);                                        \
    add_raw(key, GgufType::tag, std::move(b));           \
  }
ATTNZOO_GGUF_SCALAR(add_u8, uint8_t, U8)
ATTNZOO_GGUF_SCALAR(add_i8, int8_t, I8)
ATTNZOO_GGUF_SCALAR(add_u16, uint16_t, U16)
ATTNZOO_GGUF_SCALAR(add_i16, int16_t, I16)
ATTNZOO_GGUF_SCALAR(add_u32, uint32_t, U32)
ATTNZOO_GGUF_SCALAR(add_i32, int32_t, I32)
ATTNZOO_GGUF_SCALAR(add_u64, uint64_t, U64)
ATTNZOO_GGUF_SCALAR(add_i64, int64_t, I64)
ATTNZOO_GGUF_SCALAR(add_f32, float, F32)
ATTNZOO_GGUF_SCALAR(add_f64, double, F64)
#undef ATTNZOO_GGUF_SCALAR

void GgufWriter::add_value(const std::string& key, const GgufValue& v) {
  std::vector<uint8_t> b;
  put_value(b, v);
  add_raw(key, v.type(), std::move(b));
}

void GgufWriter::add_bool(const std::string& key, bool v) { add_raw(key, GgufType::BOOL, {uint8_t(v ? 1 : 0)}); }

void GgufWriter::add_string(const std::string& key, const std::string& v) {
  std::vector<uint8_t> b;
  put_string(b, v);
  add_raw(key, GgufType::STRING, std::move(b));
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& v) {
  std::vector<uint8_t> b;
  put<uint32_t>(b, uint32_t(GgufType::STRING));
  put<uint64_t>(b, v.size());
  for (const std::string& s : v) put_string(b, s);
  add_raw(key, GgufType::ARRAY, std::move(b));
}

void GgufWriter::add_scalar_array(const std::string& key, GgufType elem_type, const void* elems, uint64_t count) {
  const uint64_t size = gguf_scalar_size(elem_type);
  if (size == 0) throw ArgumentError("GGUF metadata: key '" + key + "': arrays of " + gguf_type_name(elem_type) +
                                     " take add_string_array");
  std::vector<uint8_t> b;
  put<uint32_t>(b, uint32_t(elem_type));
  put<uint64_t>(b, count);
  const auto* p = static_cast<const uint8_t*>(elems);
  b.insert(b.end(), p, p + checked_mul(int64_t(count), int64_t(size), "GGUF array bytes"));
  add_raw(key, GgufType::ARRAY, std::move(b));
}

void GgufWriter::add_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  add_scalar_array(key, GgufType::I32, v.data(), v.size());
}
void GgufWriter::add_f32_array(const std::string& key, const std::vector<float>& v) {
  add_scalar_array(key, GgufType::F32, v.data(), v.size());
}

void GgufWriter::add_tensor(const std::string& name, const std::vector<int64_t>& ne, QuantType type, Producer produce) {
  if (name.empty()) throw ArgumentError("GGUF tensor: empty name");
  for (const Tensor& t : tensors_)
    if (t.name == name) throw ArgumentError("GGUF tensor '" + name + "' added twice");
  if (ne.empty() || ne.size() > GgufFile::kMaxDims)
    throw ArgumentError("GGUF tensor '" + name + "': expected 1 to 4 dimensions, got " + std::to_string(ne.size()));
  int64_t rows = 1;
  for (size_t i = 1; i < ne.size(); ++i) {
    if (ne[i] <= 0) throw ArgumentError("GGUF tensor '" + name + "': dimension " + std::to_string(i) + " is " + std::to_string(ne[i]));
    rows = checked_mul(rows, ne[i], "GGUF tensor rows");
  }
  const auto row = ne[0] > 0 ? quant_row_bytes(type, ne[0]) : std::nullopt;
  if (!row)
    throw ArgumentError("GGUF tensor '" + name + "': rows of " + std::to_string(ne[0]) + " values are not whole " +
                        quant_type_name(type) + " blocks");
  tensors_.push_back({name, ne, type, uint64_t(checked_mul(rows, *row, "GGUF tensor bytes")), std::move(produce)});
}

void GgufWriter::write(const std::string& path) const {
  std::vector<uint8_t> head;
  put<uint32_t>(head, 0x46554747);  // "GGUF"
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, kvs_.size());
  for (const auto& [key, value] : kvs_) {
    put_string(head, key);
    head.insert(head.end(), value.begin(), value.end());
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, uint32_t(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(head, uint64_t(d));
    put<uint32_t>(head, uint32_t(t.type));
    put<uint64_t>(head, offset);
    offset = align_up(offset + t.bytes, alignment_);
  }
  head.resize(align_up(head.size(), alignment_), 0);

  const std::string tmp = path + ".partial";
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(tmp.c_str(), "wb"));
  if (!f) throw LoadError(path + ": cannot open for writing: " + std::strerror(errno));
  auto fail = [&](const std::string& m) {
    f.reset();
    std::remove(tmp.c_str());
    throw LoadError(path + ": " + m);
  };
  auto emit = [&](const uint8_t* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f.get()) != n) fail(std::string("write failed: ") + std::strerror(errno));
  };
  emit(head.data(), head.size());
  static const std::vector<uint8_t> zeros(4096, 0);
  for (const Tensor& t : tensors_) {
    std::vector<uint8_t> data;
    try {
      data = t.produce();
    } catch (...) {
      f.reset();
      std::remove(tmp.c_str());
      throw;
    }
    if (data.size() != t.bytes)
      fail("tensor '" + t.name + "': produced " + std::to_string(data.size()) + " bytes, its shape and type " +
           quant_type_name(t.type) + " take " + std::to_string(t.bytes));
    emit(data.data(), data.size());
    for (uint64_t pad = align_up(t.bytes, alignment_) - t.bytes; pad > 0;) {
      const size_t n = size_t(std::min<uint64_t>(pad, zeros.size()));
      emit(zeros.data(), n);
      pad -= n;
    }
  }
  if (std::fflush(f.get()) != 0) fail(std::string("write failed: ") + std::strerror(errno));
  f.reset();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw LoadError(path + ": cannot rename the finished file into place: " + std::strerror(errno));
  }
}

}  // namespace attnzoo
