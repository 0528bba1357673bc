#pragma once
// Reader for the safetensors format: [u64 little-endian header length N][N bytes of JSON header][data]. The
// header maps tensor names to {dtype, shape, data_offsets: [begin, end]} (offsets relative to the data
// section) plus an optional "__metadata__" string->string map. Files are untrusted: every field is checked
// against the file before any tensor is handed out, and tensors are zero-copy views into the read-only mapping.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "loader/load_error.h"
#include "loader/mapped_file.h"

namespace attnzoo {

// Element types a safetensors file may declare (the format's names, e.g. "BF16").
enum class FileDType : uint8_t { BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F8_E4M3, F8_E5M2, F16, BF16, F32, F64 };

size_t file_dtype_size(FileDType t);
const char* file_dtype_name(FileDType t);
// The attnzoo dtype that holds the same bits, or false when there is none (BOOL, I8, F64 ...).
bool to_dtype(FileDType t, DType* out);

struct TensorInfo {
  std::string name;
  FileDType dtype = FileDType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets within the data section, end - begin == numel * element size
  uint64_t end = 0;
  int64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  static constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // real headers are KBs to a few MB

  // Maps and validates the file. Throws LoadError naming the file (and the tensor, when one is at fault).
  static SafetensorsFile open(const std::string& path);
  // Validates bytes already in memory (or mapped); the result keeps `bytes` alive.
  static SafetensorsFile parse(std::shared_ptr<const MappedFile> bytes);

  const std::string& path() const { return file_->path(); }
  // Every tensor, sorted by name.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::shared_ptr<const MappedFile>& mapping() const { return file_; }

  bool has(std::string_view name) const { return find(name) != nullptr; }
  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  const TensorInfo& info(std::string_view name) const;  // throws LoadError when absent

  // A contiguous view over the mapping. The memory is read-only (writing through it faults); it stays valid
  // while this object or a copy of mapping() lives. Throws DTypeError when the file dtype has no attnzoo
  // DType, LoadError when the tensor is missing, has more than TensorView::kMaxDims dimensions, or its data is
  // not aligned to its element size.
  TensorView view(std::string_view name) const;
  // The raw bytes of a tensor, any dtype.
  const uint8_t* data(std::string_view name) const;
  // Sum of all tensors' bytes.
  uint64_t total_bytes() const;

 private:
  std::shared_ptr<const MappedFile> file_;
  const uint8_t* data_section_ = nullptr;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace attnzoo
