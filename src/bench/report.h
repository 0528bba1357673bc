#pragma once
// The C++-only kernel report (peaks + prefill rows, no PyTorch): the same layout and JSON keys as
// python/attnzoo/bench.py, so tools reading `--json` need not care which one produced it.
#include <string>
#include <vector>

#include "bench/kernel_bench.h"
#include "bench/peak.h"

namespace attnzoo::bench {

struct KernelReport {
  Scale scale = Scale::full;
  FmaPeak fma;
  MemoryBandwidth memory;
  std::vector<KernelResult> rows;
  std::string note;  // e.g. why PyTorch ratios are missing
};

// Measures the peaks and times the C++ cases at `scale`.
KernelReport run_cpp_kernel_report(Scale scale);

std::string format_text(const KernelReport& r);
std::string format_json(const KernelReport& r);

}  // namespace attnzoo::bench
