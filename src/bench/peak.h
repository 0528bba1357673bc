#pragma once
// What this machine can do at best, measured rather than looked up: the f32 FMA rate of the active SIMD
// target and the streaming read bandwidth from DRAM, both on every thread of the global pool. Kernel
// benchmarks report their speed as a fraction of these two numbers.
#include <cstdint>
#include <functional>

#include "core/dispatch.h"

namespace attnzoo::bench {

struct FmaPeak {
  double gflops = 0;             // all threads together, best run
  double gflops_per_thread = 0;  // gflops / threads
  int threads = 0;
  int lanes = 0;   // f32 lanes per vector on the measured target
  int chains = 0;  // independent FMA dependency chains per thread
  Target target = Target::scalar;
  double seconds = 0;  // wall time of the best run
  int runs = 0;
  bool avx_vnni = false;  // measure_avx2_int8_peak: the chains were AVX-VNNI's vpdpbusd
};

struct MemoryBandwidth {
  double gbps = 0;  // 1e9 bytes per second, best run
  int64_t bytes = 0;
  int threads = 0;
  double seconds = 0;  // wall time of the best run
  int runs = 0;
};

// Each run lasts about `seconds_per_run`; the best of `runs` is reported. Throws ArgumentError on bad input.
FmaPeak measure_fma_peak(double seconds_per_run = 0.25, int runs = 3);
// The same for bf16 products with f32 accumulation (vdpbf16ps, 64 flops per instruction), the ceiling of
// matmul precision "medium"; gflops stays 0 where bf16_dot_available() is false.
FmaPeak measure_bf16_dot_peak(double seconds_per_run = 0.25, int runs = 3);
// The same on AMX tiles (tdpbf16ps: 16 x 16 x 32 products per instruction, four accumulator tiles), the ceiling
// of bf16 products where amx_bf16_enabled(); gflops stays 0 elsewhere. `lanes` is products per instruction.
FmaPeak measure_amx_bf16_peak(double seconds_per_run = 0.25, int runs = 3);
// The same for 8-bit integer products with int32 accumulation (vpdpbusd, 128 operations per instruction), the
// ceiling of prompts on the VNNI integer rows; gflops (giga-operations) stays 0 where quant_gemv_vnni_enabled()
// is false.
FmaPeak measure_vnni_int8_peak(double seconds_per_run = 0.25, int runs = 3);
// The same on the AVX2 integer rows (32 byte products per step, `lanes`), the ceiling of prompts on them (AVX2
// CPUs, AVX-512 ones without VNNI, the Q5 formats everywhere): vpmaddubsw + vpmaddwd + vpaddd per step; with
// `avx_vnni` (the regrouped rows, which use it) AVX-VNNI's vpdpbusd where quant_gemv_groups_avx_vnni_enabled(),
// reported in the result's `avx_vnni`. gflops stays 0 where no AVX2 or AVX-512 target is active
// (quant_gemv_avx2_enabled()).
FmaPeak measure_avx2_int8_peak(double seconds_per_run = 0.25, int runs = 3, bool avx_vnni = false);

// Streams a `bytes` buffer (pick several times the L3 size) through every thread, best of `runs`.
MemoryBandwidth measure_memory_bandwidth(int64_t bytes, int runs = 3);

// Runs fn(thread) exactly once on each thread of the global pool, all starting together (a barrier stops a
// fast thread from claiming a second task). Returns seconds from the common start to the last finish.
double run_on_every_thread(const std::function<void(int thread)>& fn);

}  // namespace attnzoo::bench
