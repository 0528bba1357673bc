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

// The pages wholly inside [p, p + n) are not needed again by this process: for a MappedFile's read-only mapping
// they leave its resident set (MADV_DONTNEED; the mapping is private and never written, so a later touch reads the
// file again) and stay in the page cache, so the next load of the same file, or another process mapping it, reads
// no disk. Any other memory is only hinted out (MADV_PAGEOUT: to swap, if there is any; contents kept). For a
// mapping's tensors copied at load (Linear's CopiedSource), so that the copy replaces them in the resident set
// instead of doubling it.
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
