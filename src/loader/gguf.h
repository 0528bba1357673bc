#pragma once
// Reader for llama.cpp's GGUF format (versions 2 and 3; little-endian only):
//   "GGUF" u32 version, u64 tensor_count, u64 kv_count,
//   kv_count x (string key, u32 value type, value),           string = u64 length + bytes
//   tensor_count x (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset),
//   padding to general.alignment (default 32), then the data section; offsets are relative to it.
// Files are untrusted: every count, length, dimension product and offset is checked with overflow-safe arithmetic
// before it is used, and counts are capped by the bytes left in the file, so no field can make the reader
// allocate more than a small multiple of the file. Tensors are zero-copy views into the read-only mapping.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/quant_type.h"
#include "loader/load_error.h"
#include "loader/mapped_file.h"

namespace attnzoo {

// The value types of GGUF metadata, with the ids the file stores.
enum class GgufType : uint32_t { U8 = 0, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 };
const char* gguf_type_name(GgufType t);  // "u32", "string", "array" ...
// Element size in bytes of a scalar GGUF value type (0 for STRING / ARRAY).
uint64_t gguf_scalar_size(GgufType t);

// One metadata value. Scalars keep their bits, strings their bytes; arrays of scalars keep the packed
// little-endian elements as the file stores them (one copy, no per-element overhead); arrays of strings and of
// arrays keep one GgufValue per element.
class GgufValue {
 public:
  GgufType type() const { return type_; }
  bool is_array() const { return type_ == GgufType::ARRAY; }

  // Scalar reads; each throws LoadError naming `what` unless the value is exactly that type.
  // as_int() accepts any integer type (u64 above INT64_MAX refused), as_float() f32 or f64.
  int64_t as_int(std::string_view what) const;
  double as_float(std::string_view what) const;
  bool as_bool(std::string_view what) const;
  const std::string& as_string(std::string_view what) const;
  uint64_t raw_bits() const { return bits_; }  // a scalar's bits, zero-extended (f32 as its 32 bits)

  // Arrays.
  GgufType elem_type() const { return elem_type_; }
  uint64_t size() const { return count_; }
  // Element i of an array of scalars, as a scalar GgufValue; of strings / arrays, the stored element.
  GgufValue at(uint64_t i) const;
  const std::vector<uint8_t>& packed() const { return packed_; }  // arrays of scalars: the raw elements
  const std::vector<std::string>& strings() const { return strings_; }
  const std::vector<GgufValue>& arrays() const { return arrays_; }

 private:
  friend class GgufParser;
  GgufType type_ = GgufType::U8;
  GgufType elem_type_ = GgufType::U8;
  uint64_t bits_ = 0;
  uint64_t count_ = 0;
  std::string string_;
  std::vector<uint8_t> packed_;
  std::vector<std::string> strings_;
  std::vector<GgufValue> arrays_;
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the row length (the fastest dimension); torch's shape reversed
  QuantType type = QuantType::F32;
  uint64_t offset = 0;            // within the data section
  const uint8_t* data = nullptr;  // into the read-only mapping
  int64_t bytes = 0;
  int64_t numel() const;
  int64_t row_bytes() const;  // bytes of one ne[0]-long row
};

class GgufFile {
 public:
  static constexpr uint32_t kMaxDims = 4;                  // GGML_MAX_DIMS
  static constexpr uint64_t kMaxMetadataBytes = 256u << 20;  // header + metadata + tensor infos; real ones are MBs
  // What the parsed metadata may take in memory (a string or nested array costs more than its bytes in the file).
  static constexpr uint64_t kMaxMetadataMemory = 1u << 30;
  static constexpr int kMaxArrayDepth = 8;                   // nested arrays deeper than this are refused

  // Maps and validates the file. Throws LoadError naming the file and the key / tensor / field at fault.
  static GgufFile open(const std::string& path);
  static GgufFile parse(std::shared_ptr<const MappedFile> bytes);
  // open(), shared by every loader of one checkpoint (config, weights, tokenizer, chat template, EOS ids): the
  // same file (path, device, inode, size and modification time unchanged) is parsed once while anything holds
  // it, and the most recently opened one stays parsed for the loader that comes next. Thread-safe.
  static std::shared_ptr<const GgufFile> open_shared(const std::string& path);
  // Files this process has parsed so far (tests check that the loaders share one parse).
  static uint64_t parse_count();

  const std::string& path() const { return file_->path(); }
  const std::shared_ptr<const MappedFile>& mapping() const { return file_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section

  // Metadata in file order (keys are unique).
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const GgufValue* find(std::string_view key) const;  // nullptr when absent
  const GgufValue& get(std::string_view key) const;   // throws LoadError naming the key when absent

  // Typed getters: each throws LoadError "<file>: key '<key>': ..." when the key is missing or of another type.
  uint8_t get_u8(std::string_view key) const;
  int8_t get_i8(std::string_view key) const;
  uint16_t get_u16(std::string_view key) const;
  int16_t get_i16(std::string_view key) const;
  uint32_t get_u32(std::string_view key) const;
  int32_t get_i32(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  int64_t get_i64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  double get_f64(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  const GgufValue& get_array(std::string_view key) const;
  // Lenient forms for keys converters write with varying widths: any integer type / f32 or f64 (finite: a NaN or
  // an infinity is refused naming the key).
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;

  // Tensors in file order (names are unique).
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;  // nullptr when absent
  const GgufTensor& tensor(std::string_view name) const;       // throws LoadError naming the tensor

 private:
  friend class GgufParser;
  const GgufValue& typed(std::string_view key, GgufType want) const;

  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t, std::less<>> key_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace attnzoo
