#pragma once
// Timing policy shared by every benchmark (C++ table and the Python-driven one): warm up, then repeat until
// both a minimum count and a minimum time are reached, and report the median (robust to a noisy, shared
// machine) beside the best run.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace attnzoo::bench {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct TimingPolicy {
  int warmup = 1;
  int min_runs = 5;
  int max_runs = 50;
  double min_seconds = 0.5;  // keep sampling short kernels until this much time has been measured
};

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;
  int runs = 0;
};

inline Timing summarize(std::vector<double> samples) {
  Timing t;
  if (samples.empty()) return t;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  t.median_s = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  t.min_s = samples.front();
  t.max_s = samples.back();
  t.runs = int(n);
  return t;
}

template <typename Fn>
Timing time_median(Fn&& fn, const TimingPolicy& policy) {
  for (int i = 0; i < policy.warmup; ++i) fn();
  std::vector<double> samples;
  double total = 0;
  const int min_runs = std::max(1, policy.min_runs);
  const int max_runs = std::max(min_runs, policy.max_runs);
  while (int(samples.size()) < max_runs && (int(samples.size()) < min_runs || total < policy.min_seconds)) {
    const double t0 = now_seconds();
    fn();
    const double dt = now_seconds() - t0;
    samples.push_back(dt);
    total += dt;
  }
  return summarize(std::move(samples));
}

}  // namespace attnzoo::bench
