// release_mapped_pages: a file mapping's pages leave the process but stay in the page cache (the next load reads
// no disk); memory that is not a file mapping keeps its bytes.
#include "loader/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace attnzoo {
namespace {

size_t page_size() { return size_t(sysconf(_SC_PAGESIZE)); }

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = uint8_t((i * 131) >> 5);
  return bytes;
}

// A synced scratch file holding `bytes`, removed on destruction.
class ScratchFile {
 public:
  explicit ScratchFile(const std::vector<uint8_t>& bytes) {
    char path[] = "/tmp/attnzoo_mapped_file_XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    path_ = path;
    const bool written = write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size()) && fsync(fd) == 0;
    close(fd);
    if (!written) throw std::runtime_error("could not write the scratch file");
  }
  ~ScratchFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Pages of [p, p + n) in the page cache (mincore reports the cache, whoever maps the page).
size_t cached_pages(const uint8_t* p, size_t n) {
  std::vector<unsigned char> in((n + page_size() - 1) / page_size());
  if (mincore(const_cast<uint8_t*>(p), n, in.data()) != 0) return 0;
  size_t cached = 0;
  for (unsigned char c : in) cached += c & 1;
  return cached;
}

// This process's resident KiB of the mapping that starts at p (its "Rss:" line in /proc/self/smaps).
long resident_kib_of_mapping(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  char head[32];
  std::snprintf(head, sizeof head, "%lx-", static_cast<unsigned long>(reinterpret_cast<uintptr_t>(p)));
  std::string line;
  bool in_it = false;
  while (std::getline(smaps, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') != std::string::npos &&
        line.find(':') > line.find('-'))
      in_it = line.rfind(head, 0) == 0;
    else if (in_it && line.rfind("Rss:", 0) == 0)
      return std::strtol(line.c_str() + 4, nullptr, 10);
  }
  return -1;
}

TEST(MappedFile, ReleasedPagesLeaveTheProcessButStayInThePageCache) {
  const size_t pages = 64, n = pages * page_size();
  const std::vector<uint8_t> bytes = pattern(n);
  const ScratchFile scratch(bytes);
  const auto file = MappedFile::open(scratch.path());
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < n; i += page_size()) sink = sink + file->data()[i];
  const long before = resident_kib_of_mapping(file->data());
  ASSERT_GE(before, long(n / 1024)) << "every page was touched, so all should be resident";
  ASSERT_EQ(cached_pages(file->data(), n), pages);

  // Off page boundaries on both ends: only the pages wholly inside are released.
  release_mapped_pages(file->data() + 100, n - 200);
  EXPECT_LE(resident_kib_of_mapping(file->data()), long(2 * page_size() / 1024))
      << "the released pages should have left this process's resident set";
  EXPECT_EQ(cached_pages(file->data(), n), pages) << "the file's pages should still be in the page cache";
  EXPECT_EQ(std::memcmp(file->data(), bytes.data(), n), 0) << "a released page reads back the file's bytes";
}

TEST(MappedFile, ReleasingMemoryThatIsNoFileMappingKeepsItsBytes) {
  const size_t n = 64 * page_size();
  const std::vector<uint8_t> bytes = pattern(n);
  const auto held = MappedFile::from_bytes(bytes, "held");
  release_mapped_pages(held->data(), held->size());
  EXPECT_EQ(std::memcmp(held->data(), bytes.data(), n), 0);

  // Anonymous pages of a mapping of our own: MADV_DONTNEED would read them back as zeros.
  void* anon = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(anon, MAP_FAILED);
  std::memcpy(anon, bytes.data(), n);
  release_mapped_pages(anon, n);
  EXPECT_EQ(std::memcmp(anon, bytes.data(), n), 0);
  munmap(anon, n);
}

// A range reaching past a mapping's end (or a mapping already closed) is not treated as that mapping's.
TEST(MappedFile, OnlyRangesInsideALiveMappingAreDroppedAsFilePages) {
  const size_t n = 16 * page_size();
  const std::vector<uint8_t> bytes = pattern(n);
  const ScratchFile scratch(bytes);
  const uint8_t* begin = nullptr;
  {
    const auto file = MappedFile::open(scratch.path());
    begin = file->data();
    release_mapped_pages(file->data(), n);
    EXPECT_EQ(std::memcmp(file->data(), bytes.data(), n), 0);
  }
  // The same addresses, now anonymous memory of our own: released as anonymous, so the bytes stay.
  void* anon = mmap(const_cast<uint8_t*>(begin), n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(anon, MAP_FAILED);
  std::memcpy(anon, bytes.data(), n);
  release_mapped_pages(anon, n);
  EXPECT_EQ(std::memcmp(anon, bytes.data(), n), 0);
  munmap(anon, n);
}

}  // namespace
}  // namespace attnzoo
