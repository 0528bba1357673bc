#pragma once
// Read-only bytes of a file, memory-mapped, shared by every view into them: tensors borrowed from a mapping
// stay valid as long as someone holds the shared_ptr. In-memory bytes (tests, fuzzers) take the same shape.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attnzoo {

// Size limits for the JSON files a model directory holds, checked before reading (see README, Reliability).
// Real ones are far smaller: config.json files are kilobytes, the largest tokenizer.json files about 35 MB.
constexpr uint64_t kMaxConfigJsonBytes = uint64_t(16) << 20;     // config.json, generation_config.json, indexes
constexpr uint64_t kMaxTokenizerJsonBytes = uint64_t(64) << 20;  // tokenizer.json

// The pages wholly inside [p, p + n) of a read-only file mapping are not needed again: MADV_PAGEOUT drops them
// from the process (and, unless another process maps them, from the page cache), and a later touch reads them
// back, so the bytes never change. For a mapping's tensors copied at load (Linear's CopiedSource), so that the
// copy replaces them in the resident set instead of doubling it. Never for anonymous memory: with swap, that
// would push a caller's live data out.
void release_mapped_pages(const void* p, size_t n);

class MappedFile {
 public:
  // Maps the whole file read-only. Throws LoadError naming the path (missing, not a regular file -- a FIFO,
  // a device such as /dev/zero, a directory --, larger than max_bytes, mmap failed). Opened non-blocking, so a
  // FIFO is refused at once instead of waiting for a writer.
  static std::shared_ptr<const MappedFile> open(const std::string& path, uint64_t max_bytes = UINT64_MAX);
  // Owns a copy of the bytes; `name` stands in for the path in error messages.
  static std::shared_ptr<const MappedFile> from_bytes(std::vector<uint8_t> bytes, std::string name);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::vector<uint8_t> owned_;
  std::string path_;
};

}  // namespace attnzoo
