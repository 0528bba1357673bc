#pragma once
// What the CUDA bench tables' tests share: a row timer that runs the entry once on the CPU (the rows' arguments and
// byte counts are what they check, not the time), a report for the formatters with a made-up device, the tables
// run that way, and the check that the formatted report holds what a test names.
#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "bench/bandwidth_tables.h"
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

// The tables at the tiny scale on the CPU: each table named in `rows` has that many rows, and every row ran.
inline std::vector<BandwidthTableRows> run_tables_on_cpu(
    const std::vector<BandwidthTable>& tables, std::initializer_list<std::pair<const char*, size_t>> rows) {
  std::vector<BandwidthTableRows> out = run_bandwidth_tables(tables, Scale::tiny, Device::cpu(), Stream{}, run_once);
  for (const auto& [key, n] : rows) EXPECT_EQ(table_rows(out, key).size(), n) << key;
  for (const BandwidthTableRows& t : out)
    for (const LinearRow& row : t.rows) EXPECT_TRUE(row.available()) << row.shape.kernel << ": " << row.error;
  return out;
}

// The report's JSON holds every piece of `json` (a table's key and first row, say) and its text every piece of
// `text` (the tables' titles).
inline void expect_report_holds(const CudaKernelReport& r, std::initializer_list<const char*> json,
                                std::initializer_list<const char*> text) {
  const std::string j = format_cuda_json(r), t = format_cuda_text(r);
  for (const char* piece : json) EXPECT_NE(j.find(piece), std::string::npos) << piece << "\n" << j;
  for (const char* piece : text) EXPECT_NE(t.find(piece), std::string::npos) << piece << "\n" << t;
}

}  // namespace attnzoo::bench
