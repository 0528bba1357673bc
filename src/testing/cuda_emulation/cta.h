#pragma once
// A CUDA thread-block emulator for testing kernel code on the host. Each CTA's threads are fibers (ucontext) on
// one OS thread; they switch only at collectives: __syncthreads and the warp-wide instructions (ldmatrix, mma,
// shuffles), which wait for every thread of the block or warp and fail on a mismatch (divergent collectives,
// a barrier some thread never reaches). Warps run at seeded random relative speeds, so a missing barrier lets
// one warp read what another has not written yet. Shared memory (dynamic, and static __shared__ variables)
// starts as 0xFF bytes (NaN in f32, bf16 and f16); an async copy poisons its destination when issued and lands
// only at the cp.async.wait_group that covers it, so a missing wait reads NaN and a copy issued into a buffer
// still being read corrupts it. Hopper's asynchronous pieces (sm90_emulated.h) follow the same rule: a TMA copy
// poisons its destination until a thread's wait on its mbarrier lands it, and a wgmma's accumulator registers
// read NaN until the wgmma.wait_group that covers it (the product itself is formed there, from shared memory as
// it is then, so a buffer refilled before the wait corrupts it).
// "Global memory" is host memory registered with bounds; async copies and the kernels' stores are checked
// against it. Any violation prints what and where, then aborts.
#include <cstddef>
#include <cstdint>
#include <functional>

#include "testing/cuda_emulation/prelude.h"

namespace attnzoo::cuda_emulation {

[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Host memory standing in for one device allocation: 256-byte aligned, filled with 0xA5 (garbage, not zero),
// registered for bound checks while it lives.
class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  unsigned char* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  unsigned char* data_;
  size_t bytes_;
};
// Fails unless [p, p + bytes) lies inside one live DeviceMemory.
void check_global(const void* p, size_t bytes, const char* what);

// Seeds the warps' relative speeds of every launch that follows.
void seed_schedule(uint64_t seed);

// Runs grid.x * grid.y CTAs of `threads` threads (a multiple of 32, at most 1024), one after another, each
// calling body(smem) with `smem_bytes` of fresh shared memory; blockIdx, threadIdx, blockDim and gridDim are set.
void launch(dim3 grid, int threads, size_t smem_bytes, const std::function<void(unsigned char* smem)>& body);

// For the emulated instructions (sm80_emulated.h): the running thread and its block's shared memory.
int thread_index();
unsigned char* shared_at(uint32_t offset, size_t bytes, const char* what);
uint32_t shared_offset(const void* p);

// Warp collective: every lane of the calling warp contributes `bytes` (at most 32) of `mine`; returns once all
// have, with the 32 contributions (lane l at l * 32 bytes), valid until the lane's next collective. `kind`
// names the instruction, so that lanes meeting at different instructions fail instead of mixing data.
const unsigned char* warp_exchange(const void* mine, size_t bytes, int kind);

// cp.async: queue a copy of `bytes` from `src` (or zeros when !valid) into shared `dst`; commit the open group;
// land all but the newest n groups.
void async_copy(uint32_t dst, const void* src, int bytes, bool valid);
void async_commit();
void async_wait(int n);

// Warpgroup collective (4 consecutive warps, 128 threads): as warp_exchange, lane l of the warpgroup at l * 32.
const unsigned char* warpgroup_exchange(const void* mine, size_t bytes, int kind);

// bar.sync id, nthreads: waits until `nthreads` threads (a multiple of 32) have arrived at barrier `id` (1..15;
// 0 is __syncthreads'); bar.arrive id, nthreads: counts as one of them without waiting. Stricter than the ISA,
// so that a wrong count or a stray arrive fails instead of passing by luck: every arrival of a phase names the
// same count, a thread arrives at most once per phase, a phase needs at least one waiting thread (arrivals
// alone synchronize nothing), and no phase may be left incomplete when the CTA ends.
void named_barrier_sync(int id, int nthreads);
void named_barrier_arrive(int id, int nthreads);

// mbarrier objects at shared offsets (PTX ISA "mbarrier"): a phase completes when its pending arrivals and its
// transaction bytes both reach zero; the next phase then expects `count` arrivals again.
void mbarrier_init(uint32_t bar, int count);
void mbarrier_arrive(uint32_t bar, uint32_t expect_tx_bytes);  // expect_tx (when > 0), then arrive
bool mbarrier_test_parity(uint32_t bar, uint32_t parity);       // has the phase of this parity completed?
void mbarrier_wait_parity(uint32_t bar, uint32_t parity);       // blocks the thread until it has
// An asynchronous copy of `bytes` into shared `dst` completing on `bar`'s transaction count: `dst` reads NaN
// until a wait on `bar` lands it (land() writes it then).
void bulk_copy(uint32_t dst, size_t bytes, uint32_t bar, std::function<void()> land);

// wgmma's asynchronous groups for the running thread. An issued op makes its accumulator's `n` registers read
// NaN; `compute(value)` runs at the wait_group that covers it, on the value the registers had at the first issue
// (or zeros when !scale_d), and the registers get the result once no op on them is left in flight.
void wgmma_fence();
void wgmma_issue(float* acc, int n, bool scale_d, std::function<void(float* value)> compute);
void wgmma_commit();
void wgmma_wait(int n);

}  // namespace attnzoo::cuda_emulation
