#include "loader/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "loader/load_error.h"

namespace attnzoo {

namespace {

// The address ranges of the live file mappings (MappedFile::open), so a release can tell a file's pages, which
// MADV_DONTNEED drops from this process alone, from anonymous memory, where MADV_DONTNEED would zero them.
struct FileMappings {
  std::mutex mutex;
  std::map<uintptr_t, uintptr_t> end_of;  // begin -> end
};
// Never destroyed: a MappedFile held by a static may be unmapped after every static destructor has run.
FileMappings& file_mappings() {
  static FileMappings* const live = new FileMappings();
  return *live;
}

bool inside_a_file_mapping(uintptr_t begin, uintptr_t end) {
  FileMappings& f = file_mappings();
  std::lock_guard<std::mutex> lock(f.mutex);
  auto it = f.end_of.upper_bound(begin);
  if (it == f.end_of.begin()) return false;
  --it;
  return end <= it->second;
}

}  // namespace

void release_mapped_pages(const void* p, size_t n) {
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (uintptr_t(p) + page - 1) / page * page, end = (uintptr_t(p) + n) / page * page;
  if (end <= begin) return;
  // A hint either way: errors are ignored and the bytes read back are the same.
  if (inside_a_file_mapping(begin, end)) {
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    return;
  }
#ifdef MADV_PAGEOUT
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#endif
}

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw LoadError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw LoadError(path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw LoadError(path + ": not a regular file (FIFOs, devices and directories are refused)");
  }
  if (uint64_t(st.st_size) > max_bytes) {
    ::close(fd);
    throw LoadError(path + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                    std::to_string(max_bytes >> 20) + " MiB limit for this file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = size_t(st.st_size);
  if (f->size_ > 0) {  // mmap of zero bytes is an error; an empty file simply has no data
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw LoadError(path + ": mmap failed: " + std::strerror(err));
    }
    f->data_ = static_cast<const uint8_t*>(p);
    f->mapped_ = true;
    FileMappings& live = file_mappings();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.end_of[uintptr_t(p)] = uintptr_t(p) + f->size_;
  }
  ::close(fd);  // the mapping keeps its own reference to the file
  return f;
}

std::shared_ptr<const MappedFile> MappedFile::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->owned_ = std::move(bytes);
  f->data_ = f->owned_.data();
  f->size_ = f->owned_.size();
  f->path_ = std::move(name);
  return f;
}

MappedFile::~MappedFile() {
  if (!mapped_) return;
  {
    FileMappings& live = file_mappings();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.end_of.erase(uintptr_t(data_));
  }
  ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace attnzoo
