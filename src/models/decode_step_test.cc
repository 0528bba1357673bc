// A decode step's heap allocations: none once the workspaces are sized, kernels included. This binary
// replaces the global operator new and aligned_alloc (AlignedBuffer's allocator) with counting versions;
// counting is off except inside a measured step. ATTNZOO_TEST_ALLOC_TRACE=1 prints each counted allocation's
// backtrace to stderr (addresses: resolve them with addr2line -f -C -e test_models), to find what allocates.
#include <dlfcn.h>
#include <execinfo.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

#include "core/threads.h"
#include "layers/batch.h"
#include "models/model.h"
#include "testing/tiny_llama.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};

void count_allocation() {
  if (!g_counting.load(std::memory_order_relaxed)) return;
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (std::getenv("ATTNZOO_TEST_ALLOC_TRACE")) {
    g_counting.store(false);
    void* frames[32];
    backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
    g_counting.store(true);
  }
}

void* counted_malloc(std::size_t n) {
  count_allocation();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_malloc(n); }
void* operator new[](std::size_t n) { return counted_malloc(n); }
// The nothrow forms too (std::stable_sort's temporary buffer uses them): a sanitizer's own nothrow new paired
// with the free below is an alloc-dealloc mismatch.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_malloc(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept { return operator new(n, tag); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

extern "C" void* aligned_alloc(std::size_t alignment, std::size_t size) noexcept {
  using Fn = void* (*)(std::size_t, std::size_t);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "aligned_alloc"));
  count_allocation();
  return real(alignment, size);
}

namespace attnzoo {
namespace {

// Allocations made while fn runs.
template <class Fn>
int64_t allocations_in(Fn&& fn) {
  g_allocations.store(0);
  g_counting.store(true);
  fn();
  g_counting.store(false);
  return g_allocations.load();
}

TEST(DecodeStep, CountingAllocatorSeesAllocations) {
  // The counter itself must work, or the zero below would prove nothing.
  EXPECT_GE(allocations_in([] { std::vector<float> v(1000); v[0] = 1.f; }), 1);
  EXPECT_GE(allocations_in([] { std::free(aligned_alloc(64, 4096)); }), 1);
}

TEST(DecodeStep, AllocatesNothingOnceWarm) {
  // One thread: with more, which worker first claims a task of the attention kernel (and sizes its per-thread
  // scratch) changes from call to call.
  const int threads = ThreadPool::global().num_threads();
  ThreadPool::set_global_threads(1);
  struct Restore {
    int n;
    ~Restore() { ThreadPool::set_global_threads(n); }
  } restore{threads};
  testing::ScratchDir dir;
  testing::write_tiny_llama(dir);
  const auto model = Model::load(dir.str());
  const int64_t V = model->info().vocab_size;
  const int64_t B = model->cache().options().block_tokens;
  const auto seq = model->new_sequence();
  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65};
  {
    Batch batch;
    batch.add(*seq, prompt);
    model->forward(batch, true);
  }
  Batch batch;
  std::vector<float> logits(static_cast<size_t>(V), 0.f), host;
  const int64_t last = 0;
  int32_t token = 35;
  // The two forms alternate: logits into the caller's buffer, and left where computed (the engine's,
  // forward_logits: on the CPU the reused host vector).
  bool engine_form = false;
  TensorView left;
  auto step = [&] {
    batch.clear();
    batch.add(*seq, std::span(&token, 1));
    if (engine_form)
      left = model->forward_logits(batch, std::span(&last, 1), host);
    else
      model->forward(batch, std::span(&last, 1), logits);
  };
  step();  // sizes the per-thread workspaces
  engine_form = true;
  step();
  int measured = 0;
  for (int i = 0; i < 8; ++i) {
    engine_form = i % 2 == 1;
    token = int32_t((token * 31 + 7) % V);
    // Only a sequence's own lists grow (doubling: amortized), and a new block every B tokens: skip those steps.
    const bool grows = seq->tokens().size() == seq->tokens().capacity() || seq->length() % B == 0;
    if (grows) {
      step();
      continue;
    }
    const int64_t n = allocations_in(step);
    EXPECT_EQ(n, 0) << "decode step at length " << seq->length() - 1 << ": " << n
                    << " allocations (ATTNZOO_TEST_ALLOC_TRACE=1 shows where)";
    ++measured;
  }
  EXPECT_GE(measured, 4);
  ASSERT_TRUE(engine_form);
  EXPECT_EQ(left.data, host.data());
  EXPECT_EQ(left.device, Device::cpu());
  ASSERT_EQ(left.ndim, 2);
  EXPECT_EQ(left.shape[0], 1);
  EXPECT_EQ(left.shape[1], V);
  std::copy_n(host.data(), V, logits.data());
  // The step computed what forward() computes: the same logits from a fresh copy of the sequence's tokens.
  const auto fresh = model->new_sequence();
  Batch whole;
  whole.add(*fresh, std::span(seq->tokens()));
  const std::vector<float> want = model->forward(whole, true);
  ASSERT_EQ(want.size(), logits.size());
  for (size_t v = 0; v < logits.size(); ++v) EXPECT_NEAR(logits[v], want[v], 1e-4f) << v;
}

TEST(DecodeStep, LogitsBufferMustFitTheRows) {
  testing::ScratchDir dir;
  testing::write_tiny_llama(dir);
  const auto model = Model::load(dir.str());
  const auto seq = model->new_sequence();
  Batch batch;
  const std::vector<int32_t> ids = {1, 2};
  batch.add(*seq, ids);
  std::vector<float> small(static_cast<size_t>(model->info().vocab_size), 0.f);  // one row; every token (two) asked for
  EXPECT_THROW(model->forward(batch, {}, small), ArgumentError);
  EXPECT_EQ(seq->length(), 0);
}

}  // namespace
}  // namespace attnzoo
