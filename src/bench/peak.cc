// FMA peak and memory bandwidth probes. The FMA loop keeps kChains independent accumulators so that
// latency x pipes (4 cycles x 2 FMA units on current x86 cores = 8 chains in flight) is covered with room to
// spare, while staying inside the 16 vector registers of AVX2. The bandwidth probe sums a buffer far larger
// than L3 with several accumulators, so the loads, not the adds, set the pace.
#include "bench/peak.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/timer.h"
#include "core/aligned_buffer.h"
#include "core/amx.h"
#include "core/bf16_dot.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/quant/gemv_kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/peak.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kChains = 12;

int FmaLanes() { return int(hn::Lanes(hn::ScalableTag<float>())); }

// acc = acc * a + b on kChains independent accumulators; returns a value depending on all of them so the
// loop cannot be removed. With a just below 1 the accumulators converge and never overflow.
float FmaChains(int64_t iterations, float seed) {
  const hn::ScalableTag<float> d;
  const auto a = hn::Set(d, 0.9999999f), b = hn::Set(d, seed * 1e-7f);
  auto c0 = hn::Set(d, seed), c1 = hn::Set(d, seed + 1), c2 = hn::Set(d, seed + 2), c3 = hn::Set(d, seed + 3);
  auto c4 = hn::Set(d, seed + 4), c5 = hn::Set(d, seed + 5), c6 = hn::Set(d, seed + 6), c7 = hn::Set(d, seed + 7);
  auto c8 = hn::Set(d, seed + 8), c9 = hn::Set(d, seed + 9), c10 = hn::Set(d, seed + 10);
  auto c11 = hn::Set(d, seed + 11);
  for (int64_t i = 0; i < iterations; ++i) {
    c0 = hn::MulAdd(c0, a, b);
    c1 = hn::MulAdd(c1, a, b);
    c2 = hn::MulAdd(c2, a, b);
    c3 = hn::MulAdd(c3, a, b);
    c4 = hn::MulAdd(c4, a, b);
    c5 = hn::MulAdd(c5, a, b);
    c6 = hn::MulAdd(c6, a, b);
    c7 = hn::MulAdd(c7, a, b);
    c8 = hn::MulAdd(c8, a, b);
    c9 = hn::MulAdd(c9, a, b);
    c10 = hn::MulAdd(c10, a, b);
    c11 = hn::MulAdd(c11, a, b);
  }
  const auto s0 = hn::Add(hn::Add(c0, c1), hn::Add(c2, c3));
  const auto s1 = hn::Add(hn::Add(c4, c5), hn::Add(c6, c7));
  const auto s2 = hn::Add(hn::Add(c8, c9), hn::Add(c10, c11));
  const auto sum = hn::Add(hn::Add(s0, s1), s2);
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

// Sum of n floats from a 64-byte aligned buffer.
float SumFloats(const float* HWY_RESTRICT p, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    s0 = hn::Add(s0, hn::Load(d, p + i));
    s1 = hn::Add(s1, hn::Load(d, p + i + L));
    s2 = hn::Add(s2, hn::Load(d, p + i + 2 * L));
    s3 = hn::Add(s3, hn::Load(d, p + i + 3 * L));
  }
  float tail = 0.f;
  for (; i < n; ++i) tail += p[i];
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)))) + tail;
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo::bench {
float Bf16DotChains(int64_t iterations, float seed);  // peak_avx512bf16.cc
float VnniInt8Chains(int64_t iterations, float seed);  // peak_avx512vnni.cc
float AmxBf16Chains(int64_t iterations, float seed);  // peak_amx.cc
float Avx2Int8Chains(int64_t iterations, float seed);  // peak_avx2.cc
float AvxVnniInt8Chains(int64_t iterations, float seed);  // peak_avx2.cc

HWY_EXPORT(FmaLanes);
HWY_EXPORT(FmaChains);
HWY_EXPORT(SumFloats);

namespace {
// Results land here so the optimizer must compute them.
std::atomic<float> g_sink{0.f};

void consume(float v) { g_sink.store(g_sink.load(std::memory_order_relaxed) + v, std::memory_order_relaxed); }
}  // namespace

double run_on_every_thread(const std::function<void(int thread)>& fn) {
  ThreadPool& pool = ThreadPool::global();
  const int n = pool.num_threads();
  std::atomic<int> arrived{0};
  std::vector<double> start(size_t(n), 0.0), end(size_t(n), 0.0);
  pool.parallel_for(n, [&](int64_t task, int) {
    arrived.fetch_add(1);
    // A pool that runs tasks serially (called from inside a task) would never fill the barrier: give up
    // waiting after a while rather than hang.
    const double give_up = now_seconds() + 2.0;
    while (arrived.load() < n && now_seconds() < give_up) std::this_thread::yield();
    start[size_t(task)] = now_seconds();
    fn(int(task));
    end[size_t(task)] = now_seconds();
  });
  return *std::max_element(end.begin(), end.end()) - *std::min_element(start.begin(), start.end());
}

// Calibrates `chains(iterations, seed)` on one thread to last about seconds_per_run, then runs it on every
// thread `runs` times; fills r.gflops (best run) from flops_per_iteration.
void run_peak_probe(double seconds_per_run, int runs, double flops_per_iteration,
                    const std::function<float(int64_t, float)>& chains, FmaPeak& r) {
  require(seconds_per_run > 0 && seconds_per_run <= 60, "seconds", "must be in (0, 60]");
  require(runs >= 1 && runs <= 1000, "runs", "must be in [1, 1000]");
  r.threads = ThreadPool::global().num_threads();
  r.runs = runs;
  int64_t iterations = 1 << 14;
  double probe = 0;
  for (;;) {
    const double t0 = now_seconds();
    consume(chains(iterations, 1.f));
    probe = now_seconds() - t0;
    if (probe > 0.01 || iterations > (int64_t(1) << 40)) break;
    iterations *= 4;
  }
  iterations = std::max<int64_t>(1024, int64_t(double(iterations) * seconds_per_run / probe));

  const double flops_per_thread = flops_per_iteration * double(iterations);
  double best = 0;
  for (int run = 0; run < runs; ++run) {
    const double seconds = run_on_every_thread([&](int thread) { consume(chains(iterations, 1.f + float(thread))); });
    const double gflops = flops_per_thread * r.threads / seconds * 1e-9;
    if (gflops > best) {
      best = gflops;
      r.seconds = seconds;
    }
  }
  r.gflops = best;
  r.gflops_per_thread = best / r.threads;
}

FmaPeak measure_fma_peak(double seconds_per_run, int runs) {
  FmaPeak r;
  r.target = active_target();
  r.lanes = HWY_DYNAMIC_DISPATCH(FmaLanes)();
  r.chains = HWY_NAMESPACE::kChains;
  run_peak_probe(seconds_per_run, runs, 2.0 * r.chains * r.lanes,
                 [](int64_t n, float seed) { return HWY_DYNAMIC_DISPATCH(FmaChains)(n, seed); }, r);
  return r;
}

FmaPeak measure_bf16_dot_peak(double seconds_per_run, int runs) {
  FmaPeak r;
  r.target = active_target();
  if (!bf16_dot_available()) return r;  // probed where the CPU has it, used or not: the table shows why
  r.lanes = 32;  // bf16 products per instruction
  r.chains = 12;
  run_peak_probe(seconds_per_run, runs, 2.0 * r.chains * r.lanes, Bf16DotChains, r);
  return r;
}

FmaPeak measure_amx_bf16_peak(double seconds_per_run, int runs) {
  FmaPeak r;
  r.target = active_target();
  if (!amx_bf16_enabled()) return r;
  r.lanes = 16 * 16 * 32;  // bf16 products per tdpbf16ps
  r.chains = 4;
  run_peak_probe(seconds_per_run, runs, 2.0 * r.chains * r.lanes, AmxBf16Chains, r);
  return r;
}

FmaPeak measure_vnni_int8_peak(double seconds_per_run, int runs) {
  FmaPeak r;
  r.target = active_target();
  if (!quant_gemv_vnni_enabled()) return r;
  r.lanes = 64;  // byte products per vpdpbusd
  r.chains = 12;
  run_peak_probe(seconds_per_run, runs, 2.0 * r.chains * r.lanes, VnniInt8Chains, r);
  return r;
}

FmaPeak measure_avx2_int8_peak(double seconds_per_run, int runs, bool avx_vnni) {
  FmaPeak r;
  r.target = active_target();
  if (!quant_gemv_avx2_enabled()) return r;
  r.lanes = 32;  // byte products per step
  r.chains = 12;
  r.avx_vnni = avx_vnni && quant_gemv_groups_avx_vnni_enabled();
  run_peak_probe(seconds_per_run, runs, 2.0 * r.chains * r.lanes, r.avx_vnni ? AvxVnniInt8Chains : Avx2Int8Chains, r);
  return r;
}

MemoryBandwidth measure_memory_bandwidth(int64_t bytes, int runs) {
  require(bytes >= (int64_t(1) << 16) && bytes <= (int64_t(1) << 40), "bytes",
          "must be in [64 KiB, 1 TiB], got " + std::to_string(bytes));
  require(runs >= 1 && runs <= 1000, "runs", "must be in [1, 1000]");
  active_target();
  MemoryBandwidth r;
  r.threads = ThreadPool::global().num_threads();
  r.runs = runs;
  // Each thread owns a contiguous slice, a multiple of 64 floats (one 256-byte step of the unrolled loop).
  const size_t floats = size_t(bytes / 4) / 64 * 64;
  r.bytes = int64_t(floats * 4);
  const size_t per_thread = (floats / 64 + size_t(r.threads) - 1) / size_t(r.threads) * 64;
  AlignedBuffer<float> buffer(floats);
  auto slice = [&](int thread, size_t* begin, size_t* count) {
    *begin = std::min(floats, size_t(thread) * per_thread);
    *count = std::min(per_thread, floats - *begin);
  };
  // First touch from the thread that will read the slice, so pages sit near it on multi-socket machines.
  run_on_every_thread([&](int thread) {
    size_t begin, count;
    slice(thread, &begin, &count);
    std::fill(buffer.data() + begin, buffer.data() + begin + count, 1.f);
  });
  double best = 0;
  for (int run = 0; run < runs; ++run) {
    const double seconds = run_on_every_thread([&](int thread) {
      size_t begin, count;
      slice(thread, &begin, &count);
      consume(HWY_DYNAMIC_DISPATCH(SumFloats)(buffer.data() + begin, count));
    });
    const double gbps = double(r.bytes) / seconds * 1e-9;
    if (gbps > best) {
      best = gbps;
      r.seconds = seconds;
    }
  }
  r.gbps = best;
  return r;
}

}  // namespace attnzoo::bench
#endif  // HWY_ONCE
