#pragma once
#include <cstdint>
#include <string>

namespace attnzoo {

struct CpuInfo {
  std::string model;
  int logical_cpus = 0;
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  // per core for L1/L2, per shared instance for L3
};

// Read from /proc/cpuinfo and sysfs; fields it cannot find stay empty / zero.
CpuInfo read_cpu_info();

}  // namespace attnzoo
