// What a Linear's load-time copy does to its source: it reads it, tells CopiedSource which spans it read, and
// leaves the pages where they are. Dropping them is its caller's decision (the loaders drop a file mapping's).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "layers/linear.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using Span = std::pair<const void*, size_t>;

// A read-only, shared mapping of a fresh file holding `bytes` (synced, so its pages are clean: MADV_PAGEOUT
// would drop them at once, which is what the residency check below would see).
class FileMapping {
 public:
  explicit FileMapping(const std::vector<uint8_t>& bytes) : size_(bytes.size()) {
    char path[] = "/tmp/attnzoo_linear_source_XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    unlink(path);
    const bool written = write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size()) && fsync(fd) == 0;
    data_ = written ? mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (data_ == MAP_FAILED) throw std::runtime_error("could not write and map the scratch file");
  }
  ~FileMapping() { munmap(data_, size_); }
  const uint8_t* data() const { return static_cast<const uint8_t*>(data_); }
  // Pages of the mapping in memory (mincore), after reading every one of them.
  size_t resident_pages_after_touch() const {
    const size_t page = size_t(sysconf(_SC_PAGESIZE)), pages = (size_ + page - 1) / page;
    volatile uint8_t sink = 0;
    for (size_t p = 0; p < pages; ++p) sink = sink + data()[p * page];
    return resident_pages();
  }
  size_t resident_pages() const {
    const size_t page = size_t(sysconf(_SC_PAGESIZE)), pages = (size_ + page - 1) / page;
    std::vector<unsigned char> in(pages);
    if (mincore(data_, size_, in.data()) != 0) return 0;
    size_t n = 0;
    for (unsigned char c : in) n += c & 1;
    return n;
  }
  size_t pages() const { return (size_ + size_t(sysconf(_SC_PAGESIZE)) - 1) / size_t(sysconf(_SC_PAGESIZE)); }

 private:
  size_t size_;
  void* data_;
};

std::vector<uint8_t> bytes_of(const testing::HostTensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.view.data);
  return std::vector<uint8_t>(p, p + t.view.numel() * int64_t(dtype_size(t.view.dtype)));
}

// The spans cover [data, data + bytes) once, in order, every boundary between two on a 64 KiB-aligned address.
void expect_covers(const std::vector<Span>& spans, const void* data, size_t bytes) {
  ASSERT_FALSE(spans.empty());
  const auto* at = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(spans[i].first, at) << "span " << i;
    if (i > 0) EXPECT_EQ(reinterpret_cast<uintptr_t>(at) % (64 << 10), 0u) << "span " << i;
    at += spans[i].second;
  }
  EXPECT_EQ(at, static_cast<const uint8_t*>(data) + bytes);
}

// f16 is widened on every CPU: the copy reads the source once, says so, and the caller's pages stay in memory
// (a file mapping's clean pages, which MADV_PAGEOUT would drop at once).
TEST(LinearCopiedSource, AWidenedCopyReportsItsSourceAndLeavesItResident) {
  const testing::HostTensor w16(DType::f16, {256, 512}, 3, 0.5f);
  const std::vector<uint8_t> bytes = bytes_of(w16);
  const FileMapping file(bytes);
  const TensorView view = TensorView::contiguous(const_cast<uint8_t*>(file.data()), DType::f16, {256, 512});
  const size_t resident = file.resident_pages_after_touch();
  ASSERT_EQ(resident, file.pages()) << "the scratch file's pages were not all in memory after reading them";
  const Linear plain = Linear::from_weights(view, {}, "w");
  EXPECT_TRUE(plain.owns_weight());
  EXPECT_EQ(plain.replaced_source_bytes(), bytes.size());
  EXPECT_EQ(file.resident_pages(), resident);
  EXPECT_EQ(std::memcmp(file.data(), bytes.data(), bytes.size()), 0);
  std::vector<Span> spans;
  const Linear told = Linear::from_weights(view, {}, "w", DType::f32,
                                           [&](const void* p, size_t n) { spans.emplace_back(p, n); });
  expect_covers(spans, file.data(), bytes.size());
  EXPECT_EQ(file.resident_pages(), resident);
}

// Borrowed weights and a copy kept beside its Linear (densified) tell nothing.
TEST(LinearCopiedSource, BorrowedWeightsReportNothing) {
  const testing::HostTensor w(DType::f32, {64, 64}, 4);
  size_t told = 0;
  const Linear l = Linear::from_weights(w.view, {}, "w", DType::f32, [&](const void*, size_t n) { told += n; });
  EXPECT_FALSE(l.owns_weight());
  EXPECT_EQ(told, 0u);
  EXPECT_EQ(l.replaced_source_bytes(), 0u);
  EXPECT_EQ(l.densified(DType::bf16).replaced_source_bytes(), 0u);
}

// bf16 rows off a cache line where AMX runs: copied in slices of about 8 MiB, each told once read; and block rows
// regrouped where the VNNI / AVX2 rows run: told whole.
TEST(LinearCopiedSource, AlignedAndRegroupedCopiesReportTheirSourceOnce) {
  const int64_t N = 6400, K = 1024;  // 12.5 MiB of bf16: two slices and a tail
  std::vector<uint8_t> rows(size_t(N * K * 2) + 64);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = uint8_t((i * 37) >> 3);  // finite bf16 values, any bits do
  for (size_t i = 1; i < rows.size(); i += 2) rows[i] = 0x3f;
  const uint8_t* off_line = rows.data() + (64 - reinterpret_cast<uintptr_t>(rows.data()) % 64) % 64 + 8;
  std::vector<Span> spans;
  const Linear bf16 = Linear::from_quantized(off_line, uint64_t(N * K * 2), QuantType::BF16, N, K, {}, "w",
                                             DType::f32, [&](const void* p, size_t n) { spans.emplace_back(p, n); });
  if (bf16.owns_weight()) {
    EXPECT_GE(spans.size(), 2u);
    expect_covers(spans, off_line, size_t(N * K * 2));
    EXPECT_EQ(bf16.replaced_source_bytes(), uint64_t(N * K * 2));
  } else {
    EXPECT_TRUE(spans.empty());  // no AMX: the rows are read where they lie
  }

  std::vector<uint8_t> q4(size_t(64 * K / 32 * 18), 0);  // Q4_0: zero scales, any nibbles
  spans.clear();
  const Linear grouped = Linear::from_quantized(q4.data(), q4.size(), QuantType::Q4_0, 64, K, {}, "q", DType::f32,
                                                [&](const void* p, size_t n) { spans.emplace_back(p, n); });
  if (grouped.owns_weight()) {
    expect_covers(spans, q4.data(), q4.size());
    EXPECT_EQ(grouped.replaced_source_bytes(), q4.size());
  } else {
    EXPECT_TRUE(spans.empty());
  }
}

}  // namespace
}  // namespace attnzoo
