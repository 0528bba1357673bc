#pragma once
// What the CUDA bench tables' tests share: a row timer that runs the entry once on the CPU (the rows' arguments and
// byte counts are what they check, not the time), and a report for the formatters with a made-up device.
#include <functional>

#include "bench/cuda_bench.h"
#include "bench/timer.h"

namespace attnzoo::bench {

inline Timing run_once(const std::function<void()>& launch) {
  const double t0 = now_seconds();
  launch();
  return summarize({now_seconds() - t0 + 1e-9});
}

inline CudaKernelReport test_report(double copy_gbps = 4000) {
  CudaKernelReport r;
  r.device = "cuda:0 test";
  r.copy_gbps = copy_gbps;
  return r;
}

}  // namespace attnzoo::bench
