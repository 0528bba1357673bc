// The machine probes return plausible numbers on every target, and the timing helper reports what it saw.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>

#include "bench/peak.h"
#include "bench/timer.h"
#include "core/amx.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/quant/gemv_kernels.h"
#include "testing/test_util.h"

namespace attnzoo::bench {
namespace {

TEST(Peak, FmaPeakIsPlausibleOnEveryTarget) {
  testing::for_each_target([](Target t) {
    const FmaPeak p = measure_fma_peak(0.02, 2);
    EXPECT_EQ(p.target, t);
    EXPECT_EQ(p.threads, ThreadPool::global().num_threads());
    EXPECT_GE(p.lanes, 1);
    EXPECT_GT(p.chains, 0);
    // Between an old embedded core and a hypothetical 100 TFLOP/s core: catches unit mistakes (x1e3).
    EXPECT_GT(p.gflops_per_thread, 0.05);
    EXPECT_LT(p.gflops_per_thread, 1e5);
    EXPECT_NEAR(p.gflops, p.gflops_per_thread * p.threads, 1e-6 * p.gflops);
    EXPECT_GT(p.seconds, 0);
  });
}

// Probed only where the tiles run: a number there (in the same plausible range), 0 under every other target.
TEST(Peak, AmxPeakIsMeasuredWhereTheTilesRun) {
  testing::for_each_target([](Target t) {
    const FmaPeak p = measure_amx_bf16_peak(0.02, 2);
    EXPECT_EQ(p.target, t);
    if (!amx_bf16_enabled()) {
      EXPECT_EQ(p.gflops, 0) << target_name(t);
      return;
    }
    EXPECT_EQ(p.lanes, 16 * 16 * 32);
    EXPECT_GT(p.gflops_per_thread, 0.05);
    EXPECT_LT(p.gflops_per_thread, 1e5);
    EXPECT_NEAR(p.gflops, p.gflops_per_thread * p.threads, 1e-6 * p.gflops);
  });
  if (!amx_support().use) GTEST_SKIP() << "no AMX here (" << amx_support().reason << "): only the 0 was checked";
}

// The 8-bit product peak where the VNNI rows run: above the f32 FMA peak of the same target (vpdpbusd forms 64
// products where an FMA forms 16), 0 under every target the rows do not run on.
TEST(Peak, VnniPeakIsMeasuredWhereTheIntegerRowsRun) {
  bool measured = false;
  testing::for_each_target([&](Target t) {
    const FmaPeak p = measure_vnni_int8_peak(0.02, 2);
    EXPECT_EQ(p.target, t);
    if (!quant_gemv_vnni_enabled()) {
      EXPECT_EQ(p.gflops, 0) << target_name(t);
      return;
    }
    measured = true;
    EXPECT_EQ(p.lanes, 64);
    EXPECT_GT(p.gflops, measure_fma_peak(0.02, 2).gflops) << target_name(t);
    EXPECT_LT(p.gflops_per_thread, 1e5);
    EXPECT_NEAR(p.gflops, p.gflops_per_thread * p.threads, 1e-6 * p.gflops);
  });
  if (!measured) GTEST_SKIP() << "no AVX-512 VNNI here: only the 0 was checked";
}

// The AVX2 rows' 8-bit peak: measured on the AVX2 and AVX-512 targets, 0 on scalar. Three instructions per 32
// products (one with AVX-VNNI) against vpdpbusd's one per 64: under the VNNI peak of the same target where both run.
TEST(Peak, Avx2Int8PeakIsMeasuredWhereTheAvx2RowsRun) {
  bool measured = false;
  testing::for_each_target([&](Target t) {
    const FmaPeak p = measure_avx2_int8_peak(0.02, 2);
    // The vpmaddubsw chain unless the regrouped rows' AVX-VNNI one is asked for (and runs here).
    const FmaPeak vnni = measure_avx2_int8_peak(0.02, 2, true);
    EXPECT_EQ(p.target, t);
    EXPECT_FALSE(p.avx_vnni);
    EXPECT_EQ(vnni.avx_vnni, quant_gemv_avx2_enabled() && quant_gemv_groups_avx_vnni_enabled());
    if (!quant_gemv_avx2_enabled()) {
      EXPECT_EQ(p.gflops, 0) << target_name(t);
      return;
    }
    measured = true;
    EXPECT_EQ(p.lanes, 32);
    EXPECT_GT(p.gflops_per_thread, 0.05);
    EXPECT_LT(p.gflops_per_thread, 1e5);
    EXPECT_NEAR(p.gflops, p.gflops_per_thread * p.threads, 1e-6 * p.gflops);
  });
  if (!measured) GTEST_SKIP() << "no AVX2 target here: only the 0 was checked";
}

TEST(Peak, MemoryBandwidthIsPlausible) {
  const MemoryBandwidth m = measure_memory_bandwidth(int64_t(16) << 20, 2);
  EXPECT_EQ(m.bytes, int64_t(16) << 20);
  EXPECT_GT(m.gbps, 0.1);
  EXPECT_LT(m.gbps, 1e5);
  EXPECT_GT(m.seconds, 0);
}

TEST(Peak, RejectsBadArguments) {
  EXPECT_THROW(measure_fma_peak(0, 1), ArgumentError);
  EXPECT_THROW(measure_fma_peak(0.01, 0), ArgumentError);
  EXPECT_THROW(measure_memory_bandwidth(100, 1), ArgumentError);
  EXPECT_THROW(measure_memory_bandwidth(int64_t(1) << 20, 0), ArgumentError);
}

TEST(Peak, EveryThreadRunsExactlyOnce) {
  std::atomic<int> calls{0};
  std::mutex m;
  std::set<int> seen;
  run_on_every_thread([&](int thread) {
    calls.fetch_add(1);
    std::lock_guard<std::mutex> lock(m);
    seen.insert(thread);
  });
  EXPECT_EQ(calls.load(), ThreadPool::global().num_threads());
  EXPECT_EQ(int(seen.size()), ThreadPool::global().num_threads());
}

TEST(Timer, MedianAndRunCounts) {
  EXPECT_DOUBLE_EQ(summarize({3, 1, 2}).median_s, 2);
  EXPECT_DOUBLE_EQ(summarize({4, 1, 2, 3}).median_s, 2.5);
  const Timing t = summarize({5, 1, 9});
  EXPECT_DOUBLE_EQ(t.min_s, 1);
  EXPECT_DOUBLE_EQ(t.max_s, 9);
  EXPECT_EQ(t.runs, 3);

  int calls = 0;
  const Timing r = time_median([&] { ++calls; }, {.warmup = 2, .min_runs = 4, .max_runs = 4, .min_seconds = 10});
  EXPECT_EQ(r.runs, 4);  // max_runs caps the min_seconds rule
  EXPECT_EQ(calls, 6);   // warm-up calls are not timed
}

}  // namespace
}  // namespace attnzoo::bench
