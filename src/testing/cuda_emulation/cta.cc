#include "testing/cuda_emulation/cta.h"

#include <ucontext.h>

#include <algorithm>
#include <cmath>
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

// One wgmma.mma_async in flight: its accumulator registers and the product to form at the covering wait.
struct WgmmaOp {
  float* acc;
  int n;
  bool scale_d;
  std::function<void(float*)> compute;
};

struct Fiber {
  ucontext_t context;
  bool done = false;
  const Barrier* waiting = nullptr;  // runnable again once its generation moves past waiting_for
  uint64_t waiting_for = 0;
  int64_t waiting_bar = -1;  // or once the mbarrier at this shared offset has completed the phase of this parity
  uint32_t waiting_parity = 0;
  std::vector<Copy> open;
  std::deque<std::vector<Copy>> groups;
  bool wgmma_fenced = false;
  std::vector<WgmmaOp> wgmma_open;
  std::deque<std::vector<WgmmaOp>> wgmma_groups;
  std::map<float*, std::vector<float>> wgmma_values;  // accumulators in flight: the value their ops build
  uint64_t named_phase[16] = {};  // per named barrier: 1 + the phase (generation) this thread last arrived in
};

struct BulkCopy {
  size_t bytes;
  std::function<void()> land;
};
struct MBarrier {
  int count = 0, pending = 0;
  int64_t tx = 0;
  uint32_t phase = 0;  // completed phases
  std::vector<BulkCopy> copies;  // issued, not landed
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
  std::vector<Barrier> warpgroup_barriers;
  std::vector<unsigned char> warpgroup_slots;  // [warpgroup][generation parity][thread][kSlotBytes]
  Barrier named[16];
  int named_waiting[16];  // threads of each named barrier's open phase that wait (bar.sync) rather than arrive
  std::map<uint32_t, MBarrier> mbarriers;
  int current = -1;
  ucontext_t scheduler;
  const std::function<void(unsigned char*)>* body = nullptr;
};
Cta cta;
std::mt19937_64 schedule(1);
std::map<uintptr_t, size_t> allocations;

MBarrier& mbarrier_at(uint32_t bar, const char* what) {
  auto it = cta.mbarriers.find(bar);
  if (it == cta.mbarriers.end()) fail("%s: no mbarrier initialized at shared offset %u", what, bar);
  return it->second;
}

void complete_if_done(MBarrier& b) {
  if (b.pending == 0 && b.tx == 0) {
    ++b.phase;
    b.pending = b.count;
  }
}

// The copies land when someone waits for them: the latest moment the hardware could.
void land_copies(MBarrier& b) {
  std::vector<BulkCopy> copies = std::move(b.copies);
  b.copies.clear();
  for (BulkCopy& c : copies) {
    c.land();
    b.tx -= int64_t(c.bytes);
    complete_if_done(b);
  }
}

bool phase_done(MBarrier& b, uint32_t parity) {
  land_copies(b);
  return (b.phase & 1u) != (parity & 1u);
}

bool cta_ready(Fiber& f) {
  if (f.done) return false;
  if (f.waiting && f.waiting->generation == f.waiting_for) return false;
  if (f.waiting_bar >= 0) return phase_done(mbarrier_at(uint32_t(f.waiting_bar), "mbarrier wait"), f.waiting_parity);
  return true;
}

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
  if (!f.wgmma_open.empty()) fail("wgmma ops never committed when the thread exits");
  if (!f.wgmma_groups.empty()) fail("wgmma groups never waited for when the thread exits");
  f.done = true;
}  // returns to the scheduler through uc_link

void run_cta(int threads) {
  const int warps = threads / 32;
  cta.fibers = std::vector<Fiber>(size_t(threads));
  while (cta.stacks.size() < size_t(threads)) cta.stacks.push_back(std::make_unique<char[]>(kStackBytes));
  cta.block_barrier = {threads, 0, -1, 0};
  cta.warp_barriers.assign(size_t(warps), Barrier{32, 0, -1, 0});
  cta.slots.assign(size_t(warps) * 2 * 32 * kSlotBytes, 0);
  cta.warpgroup_barriers.assign(size_t(warps / 4), Barrier{128, 0, -1, 0});
  cta.warpgroup_slots.assign(size_t(warps / 4) * 2 * 128 * kSlotBytes, 0);
  for (Barrier& b : cta.named) b = Barrier{};
  std::fill(std::begin(cta.named_waiting), std::end(cta.named_waiting), 0);
  cta.mbarriers.clear();
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
    for (Fiber& f : cta.fibers) {
      left |= !f.done;
      ready |= cta_ready(f);
    }
    if (!left) break;
    if (!ready) fail("deadlock: every live thread waits at a barrier the others never reach (or have exited)");
    const int first = int(schedule() % unsigned(warps));
    for (int k = 0; k < warps; ++k) {
      const int w = (first + k) % warps;
      if (int(schedule() % 8) >= speed[size_t(w)]) continue;
      for (int i = w * 32; i < w * 32 + 32; ++i) {
        Fiber& f = cta.fibers[size_t(i)];
        if (!cta_ready(f)) continue;
        cta.current = i;
        threadIdx = dim3(unsigned(i));
        swapcontext(&cta.scheduler, &f.context);
      }
    }
  }
  cta.current = -1;
  for (int id = 1; id < 16; ++id)
    if (cta.named[id].arrived)
      fail("named barrier %d: %d of its %d arrivals when the CTA ends (a bar.arrive nobody waits for, or a count "
           "above the threads that take part)", id, cta.named[id].arrived, cta.named[id].expected);
  for (const auto& [at, b] : cta.mbarriers)
    if (!b.copies.empty()) fail("a bulk copy on the mbarrier at %u was never waited for", at);
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

namespace {
// Lets other threads run before this one goes on: at the asynchronous instructions' hand-offs, so the other
// side of a missing wait or an early release runs in the gap, as it may on the GPU.
void yield_thread() {
  Fiber& f = self();
  swapcontext(&f.context, &cta.scheduler);
}
}  // namespace

const unsigned char* warpgroup_exchange(const void* mine, size_t bytes, int kind) {
  if (bytes > kSlotBytes) fail("warpgroup exchange of %zu bytes", bytes);
  self();
  const int tid = cta.current, group = tid / 128;
  if (size_t(group) >= cta.warpgroup_barriers.size()) fail("a warpgroup collective in a partial warpgroup");
  Barrier& b = cta.warpgroup_barriers[size_t(group)];
  unsigned char* slots = cta.warpgroup_slots.data() + (size_t(group) * 2 + b.generation % 2) * 128 * kSlotBytes;
  std::memcpy(slots + size_t(tid % 128) * kSlotBytes, mine, bytes);
  arrive(b, kind);
  return slots;
}

namespace {
// The checks bar.sync and bar.arrive share (cta.h): the id, the count against the phase's, one arrival a thread.
Barrier& named_arrival(const char* op, int id, int nthreads) {
  if (id <= 0 || id >= 16) fail("%s %d: ids 1..15 (0 is __syncthreads')", op, id);
  if (nthreads <= 0 || nthreads % 32 || nthreads > int(cta.fibers.size()))
    fail("%s %d with %d threads in a CTA of %zu", op, id, nthreads, cta.fibers.size());
  Barrier& b = cta.named[id];
  if (b.arrived == 0) b.expected = nthreads;
  else if (b.expected != nthreads) fail("%s %d: %d threads, others said %d", op, id, nthreads, b.expected);
  // On the GPU a second arrival counts again and completes the phase early: a race the emulator would hide.
  uint64_t& phase = self().named_phase[id];
  if (phase == b.generation + 1) fail("%s %d: a thread arrives twice in one phase of the barrier", op, id);
  phase = b.generation + 1;
  return b;
}
}  // namespace

void named_barrier_sync(int id, int nthreads) {
  Barrier& b = named_arrival("bar.sync", id, nthreads);
  // The phase this sync completes (if it does) starts the next one with no waiter.
  cta.named_waiting[id] = b.arrived + 1 == b.expected ? 0 : cta.named_waiting[id] + 1;
  arrive(b, 1000 + id);
}

void named_barrier_arrive(int id, int nthreads) {
  Barrier& b = named_arrival("bar.arrive", id, nthreads);
  if (b.arrived == 0) b.kind = 1000 + id;
  if (++b.arrived == b.expected) {
    if (cta.named_waiting[id] == 0)
      fail("bar.arrive %d: a phase of %d arrivals completed with no thread waiting at it", id, b.expected);
    b.arrived = 0;
    cta.named_waiting[id] = 0;
    ++b.generation;
  }
  // The arriving side runs on; let the waiting side (or another arriver) run in the gap, as it may on the GPU.
  yield_thread();
}

void mbarrier_init(uint32_t bar, int count) {
  if (bar % 8) fail("mbarrier.init: shared offset %u not 8-byte aligned", bar);
  shared_at(bar, 8, "mbarrier");
  if (count <= 0) fail("mbarrier.init with count %d", count);
  MBarrier& b = cta.mbarriers[bar];
  b = MBarrier{};
  b.count = b.pending = count;
}

void mbarrier_arrive(uint32_t bar, uint32_t expect_tx_bytes) {
  self();
  MBarrier& b = mbarrier_at(bar, "mbarrier.arrive");
  b.tx += expect_tx_bytes;
  if (b.pending == 0) fail("mbarrier.arrive at %u: more arrivals than its count %d", bar, b.count);
  --b.pending;
  complete_if_done(b);
  yield_thread();
}

bool mbarrier_test_parity(uint32_t bar, uint32_t parity) {
  self();
  return phase_done(mbarrier_at(bar, "mbarrier.try_wait"), parity);
}

void mbarrier_wait_parity(uint32_t bar, uint32_t parity) {
  Fiber& f = self();
  if (phase_done(mbarrier_at(bar, "mbarrier.try_wait"), parity)) return;
  f.waiting_bar = bar;
  f.waiting_parity = parity;
  swapcontext(&f.context, &cta.scheduler);
  f.waiting_bar = -1;
}

void bulk_copy(uint32_t dst, size_t bytes, uint32_t bar, std::function<void()> land) {
  self();
  std::memset(shared_at(dst, bytes, "bulk copy destination"), 0xFF, bytes);
  mbarrier_at(bar, "bulk copy").copies.push_back({bytes, std::move(land)});
  yield_thread();
}

void wgmma_fence() { self().wgmma_fenced = true; }

void wgmma_issue(float* acc, int n, bool scale_d, std::function<void(float*)> compute) {
  Fiber& f = self();
  // Stricter than the ISA, which asks for the fence only after registers changed: every issue after a wait
  // (where the registers become the kernel's again) must follow a fence.
  if (!f.wgmma_fenced) fail("wgmma.mma_async without a wgmma.fence since the last wgmma.wait_group");
  auto [it, fresh] = f.wgmma_values.try_emplace(acc);
  if (fresh) {
    it->second.assign(acc, acc + n);
    std::fill(acc, acc + n, std::nanf(""));
  }
  f.wgmma_open.push_back({acc, n, scale_d, std::move(compute)});
}

void wgmma_commit() {
  Fiber& f = self();
  f.wgmma_groups.push_back(std::move(f.wgmma_open));
  f.wgmma_open.clear();
}

void wgmma_wait(int n) {
  yield_thread();
  Fiber& f = self();
  while (int(f.wgmma_groups.size()) > n) {
    for (WgmmaOp& op : f.wgmma_groups.front()) {
      std::vector<float>& value = f.wgmma_values.at(op.acc);
      if (!op.scale_d) std::fill(value.begin(), value.end(), 0.f);
      op.compute(value.data());
    }
    f.wgmma_groups.pop_front();
  }
  // Registers no op in flight (committed or not) still writes are the kernel's again.
  for (auto it = f.wgmma_values.begin(); it != f.wgmma_values.end();) {
    bool busy = false;
    for (const auto& g : f.wgmma_groups)
      for (const WgmmaOp& op : g) busy |= op.acc == it->first;
    for (const WgmmaOp& op : f.wgmma_open) busy |= op.acc == it->first;
    if (busy) {
      ++it;
      continue;
    }
    std::copy(it->second.begin(), it->second.end(), it->first);
    it = f.wgmma_values.erase(it);
  }
  f.wgmma_fenced = false;
}

}  // namespace attnzoo::cuda_emulation
