#pragma once
// Writer for llama.cpp's GGUF format, version 3 (the layout gguf.h reads): metadata of every value type, tensor
// infos, padding to general.alignment, then each tensor's bytes at its aligned offset. Tensor data is produced one
// tensor at a time while writing (a callback), so a model never has to be held in memory twice; every produced
// size is checked against the declared shape and type. The file is written under a temporary name and renamed
// into place only when complete.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/quant_type.h"
#include "loader/gguf.h"

namespace attnzoo {

class GgufWriter {
 public:
  // alignment: a power of two in [1, 2^31] (llama.cpp's bound: general.alignment is a u32); other than 32 it is also written as general.alignment (u32), as llama.cpp does.
  explicit GgufWriter(uint64_t alignment = 32);

  // Scalars. A key may be set once (ArgumentError naming it otherwise).
  void add_u8(const std::string& key, uint8_t v);
  void add_i8(const std::string& key, int8_t v);
  void add_u16(const std::string& key, uint16_t v);
  void add_i16(const std::string& key, int16_t v);
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_u64(const std::string& key, uint64_t v);
  void add_i64(const std::string& key, int64_t v);
  void add_f32(const std::string& key, float v);
  void add_f64(const std::string& key, double v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  // Arrays: of strings, or of one scalar type given as its packed little-endian elements (elem_size bytes each).
  void add_string_array(const std::string& key, const std::vector<std::string>& v);
  void add_scalar_array(const std::string& key, GgufType elem_type, const void* elems, uint64_t count);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void add_f32_array(const std::string& key, const std::vector<float>& v);
  // A value read from another file (GgufFile::metadata()), written with its own type, byte for byte as stored
  // there (strings, nested arrays and scalar widths unchanged): what copying a file's metadata takes.
  void add_value(const std::string& key, const GgufValue& v);
  bool has_key(const std::string& key) const;
  // An integer key as set so far: the scalar, or an array's first element; nullopt when absent or not an
  // integer (what quantize's mixtures read of the hyperparameters before the file is written).
  std::optional<int64_t> first_int(const std::string& key) const;

  // A tensor: ggml-order dimensions (ne[0] the row length), its type, and the callback that yields its bytes
  // when the writer reaches it (exactly quant_row_bytes(type, ne[0]) * rows bytes, else ArgumentError).
  using Producer = std::function<std::vector<uint8_t>()>;
  void add_tensor(const std::string& name, const std::vector<int64_t>& ne, QuantType type, Producer produce);
  size_t tensor_count() const { return tensors_.size(); }

  // Writes the file; ArgumentError / LoadError naming the path, key or tensor at fault.
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    QuantType type;
    uint64_t bytes;
    Producer produce;
  };
  void add_raw(const std::string& key, GgufType type, std::vector<uint8_t> value);

  uint64_t alignment_;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> kvs_;  // key -> type id + encoded value
  std::vector<Tensor> tensors_;
};

}  // namespace attnzoo
