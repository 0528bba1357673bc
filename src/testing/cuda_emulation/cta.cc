#include "testing/cuda_emulation/cta.h"

#include <ucontext.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <vector>

// The linker's bounds of the section that prelude.h's __shared__ places static shared variables in; weak, so a
// binary without any has none.
extern "C" unsigned char __start_attnzoo_emulated_shared[] __attribute__((weak));
extern "C" unsigned char __stop_attnzoo_emulated_shared[] __attribute__((weak));

namespace attnzoo::cuda_emulation {
namespace {

// Threads that arrive wait until `expected` have; `kind` is what the first one arrived at.
struct Barrier {
  int expected = 0, arrived = 0, kind = -1;
  uint64_t generation = 0;
};
constexpr int kBlockBarrier = -1;

struct Copy {
  uint32_t dst;
  const void* src;
  int bytes;
  bool valid;
};

struct Fiber {
  ucontext_t context;
  bool done = false;
  const Barrier* waiting = nullptr;  // runnable again once its generation moves past waiting_for
  uint64_t waiting_for = 0;
  std::vector<Copy> open;
  std::deque<std::vector<Copy>> groups;
  bool ready() const { return !done && (!waiting || waiting->generation != waiting_for); }
};

// Deep enough for a D = 256 accumulator and the emulated instructions' locals in an unoptimized build.
constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kSlotBytes = 32;

// The CTA being run. Stacks are kept from one CTA to the next.
struct Cta {
  std::vector<Fiber> fibers;
  std::vector<std::unique_ptr<char[]>> stacks;
  std::vector<unsigned char> smem;
  Barrier block_barrier;
  std::vector<Barrier> warp_barriers;
  std::vector<unsigned char> slots;  // [warp][generation parity][lane][kSlotBytes]
  int current = -1;
  ucontext_t scheduler;
  const std::function<void(unsigned char*)>* body = nullptr;
};
Cta cta;
std::mt19937_64 schedule(1);
std::map<uintptr_t, size_t> allocations;

Fiber& self() {
  if (cta.current < 0) fail("an emulated instruction ran outside a CTA");
  return cta.fibers[size_t(cta.current)];
}

void arrive(Barrier& b, int kind) {
  if (b.arrived == 0) b.kind = kind;
  else if (b.kind != kind)
    fail("divergent collectives: one thread arrives at collective %d while others wait at %d", kind, b.kind);
  if (++b.arrived == b.expected) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  Fiber& f = self();
  f.waiting = &b;
  f.waiting_for = b.generation;
  swapcontext(&f.context, &cta.scheduler);
  f.waiting = nullptr;
}

void land(const Copy& c) {
  unsigned char* d = cta.smem.data() + c.dst;
  if (c.valid) std::memcpy(d, c.src, size_t(c.bytes));
  else std::memset(d, 0, size_t(c.bytes));
}

void run_thread() {
  (*cta.body)(cta.smem.data());
  Fiber& f = self();
  if (!f.open.empty()) fail("cp.async copies never committed when the thread exits");
  for (const auto& g : f.groups)
    if (!g.empty()) fail("cp.async copies never waited for when the thread exits");
  f.done = true;
}  // returns to the scheduler through uc_link

void run_cta(int threads) {
  const int warps = threads / 32;
  cta.fibers = std::vector<Fiber>(size_t(threads));
  while (cta.stacks.size() < size_t(threads)) cta.stacks.push_back(std::make_unique<char[]>(kStackBytes));
  cta.block_barrier = {threads, 0, -1, 0};
  cta.warp_barriers.assign(size_t(warps), Barrier{32, 0, -1, 0});
  cta.slots.assign(size_t(warps) * 2 * 32 * kSlotBytes, 0);
  for (int i = 0; i < threads; ++i) {
    ucontext_t& c = cta.fibers[size_t(i)].context;
    getcontext(&c);
    c.uc_stack.ss_sp = cta.stacks[size_t(i)].get();
    c.uc_stack.ss_size = kStackBytes;
    c.uc_link = &cta.scheduler;
    makecontext(&c, run_thread, 0);
  }
  // Each pass runs every ready thread of the warps drawn for it up to its next collective; a warp's chance to
  // be drawn (its speed) is redrawn now and then, so warps overtake each other by whole phases of the kernel.
  std::vector<int> speed(static_cast<size_t>(warps));
  for (long pass = 0;; ++pass) {
    if (pass % 64 == 0)
      for (int& s : speed) s = 1 + int(schedule() % 8);
    bool left = false, ready = false;
    for (const Fiber& f : cta.fibers) {
      left |= !f.done;
      ready |= f.ready();
    }
    if (!left) break;
    if (!ready) fail("deadlock: every live thread waits at a barrier the others never reach (or have exited)");
    const int first = int(schedule() % unsigned(warps));
    for (int k = 0; k < warps; ++k) {
      const int w = (first + k) % warps;
      if (int(schedule() % 8) >= speed[size_t(w)]) continue;
      for (int i = w * 32; i < w * 32 + 32; ++i) {
        Fiber& f = cta.fibers[size_t(i)];
        if (!f.ready()) continue;
        cta.current = i;
        threadIdx = dim3(unsigned(i));
        swapcontext(&cta.scheduler, &f.context);
      }
    }
  }
  cta.current = -1;
}

}  // namespace

void fail(const char* fmt, ...) {
  std::fprintf(stderr, "CUDA emulation: ");
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  std::fprintf(stderr, " [block (%u, %u), thread %d]\n", blockIdx.x, blockIdx.y, cta.current);
  std::abort();
}

DeviceMemory::DeviceMemory(size_t bytes) : bytes_(bytes) {
  data_ = static_cast<unsigned char*>(std::aligned_alloc(256, (bytes + 256) / 256 * 256));
  std::memset(data_, 0xA5, bytes);
  allocations[uintptr_t(data_)] = bytes;
}
DeviceMemory::~DeviceMemory() {
  allocations.erase(uintptr_t(data_));
  std::free(data_);
}

void check_global(const void* p, size_t bytes, const char* what) {
  const uintptr_t at = uintptr_t(p);
  auto it = allocations.upper_bound(at);
  if (it == allocations.begin() || at + bytes > std::prev(it)->first + std::prev(it)->second)
    fail("%s: [%p, +%zu) is outside every device allocation", what, p, bytes);
}

void seed_schedule(uint64_t seed) { schedule.seed(seed); }

void launch(dim3 grid, int threads, size_t smem_bytes, const std::function<void(unsigned char*)>& body) {
  if (threads % 32 != 0 || threads <= 0 || threads > 1024) fail("a CTA of %d threads", threads);
  cta.body = &body;
  gridDim = grid;
  blockDim = dim3(unsigned(threads));
  for (unsigned y = 0; y < grid.y; ++y)
    for (unsigned x = 0; x < grid.x; ++x) {
      blockIdx = dim3(x, y);
      cta.smem.assign(smem_bytes, 0xFF);
      if (__start_attnzoo_emulated_shared)
        std::memset(__start_attnzoo_emulated_shared, 0xFF,
                    size_t(__stop_attnzoo_emulated_shared - __start_attnzoo_emulated_shared));
      run_cta(threads);
    }
  cta.body = nullptr;
}

int thread_index() { return cta.current; }

unsigned char* shared_at(uint32_t offset, size_t bytes, const char* what) {
  if (size_t(offset) + bytes > cta.smem.size())
    fail("%s: shared bytes [%u, +%zu) past the %zu of the launch", what, offset, bytes, cta.smem.size());
  return cta.smem.data() + offset;
}

uint32_t shared_offset(const void* p) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  if (c < cta.smem.data() || c > cta.smem.data() + cta.smem.size()) fail("a shared address of a non-shared pointer");
  return uint32_t(c - cta.smem.data());
}

const unsigned char* warp_exchange(const void* mine, size_t bytes, int kind) {
  if (bytes > kSlotBytes) fail("warp exchange of %zu bytes", bytes);
  self();
  const int tid = cta.current, warp = tid / 32, lane = tid % 32;
  Barrier& b = cta.warp_barriers[size_t(warp)];
  // Two slot sets by generation parity: a lane that is through this exchange can write its next contribution
  // while slower lanes still read this one (it cannot get two exchanges ahead: the next one waits for them).
  unsigned char* slots = cta.slots.data() + (size_t(warp) * 2 + b.generation % 2) * 32 * kSlotBytes;
  std::memcpy(slots + size_t(lane) * kSlotBytes, mine, bytes);
  arrive(b, kind);
  return slots;
}

void sync_block() { arrive(cta.block_barrier, kBlockBarrier); }

void async_copy(uint32_t dst, const void* src, int bytes, bool valid) {
  if (dst % uint32_t(bytes) != 0) fail("cp.async: shared destination %u not %d-byte aligned", dst, bytes);
  if (uintptr_t(src) % uintptr_t(bytes) != 0) fail("cp.async: source %p not %d-byte aligned", src, bytes);
  // A zero-fill copy reads nothing, but its address must still be a valid one (the kernels promise as much).
  check_global(src, valid ? size_t(bytes) : 1, valid ? "cp.async source" : "cp.async source (zero-fill)");
  // The copy may land any time until the wait: until then its destination holds NaN bytes.
  std::memset(shared_at(dst, size_t(bytes), "cp.async destination"), 0xFF, size_t(bytes));
  self().open.push_back({dst, src, bytes, valid});
}

void async_commit() {
  Fiber& f = self();
  f.groups.push_back(std::move(f.open));
  f.open.clear();
}

void async_wait(int n) {
  Fiber& f = self();
  while (int(f.groups.size()) > n) {
    for (const Copy& c : f.groups.front()) land(c);
    f.groups.pop_front();
  }
}

}  // namespace attnzoo::cuda_emulation
