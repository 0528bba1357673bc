#pragma once
#include <cstdint>
#include <string>

namespace attnzoo {

struct CpuInfo {
  std::string model;
  // /proc/cpuinfo's vendor_id, cpu family and model: virtual machines often show a bare "AMD EPYC" as the model
  // name, and these tell the core generation (Zen 4 and Zen 5 both have AVX-512-BF16, at half / full width).
  std::string vendor;
  int family = -1, model_number = -1;
  int logical_cpus = 0;
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  // per core for L1/L2, per shared instance for L3
};

// Read from /proc/cpuinfo and sysfs; fields it cannot find stay empty / zero / -1.
CpuInfo read_cpu_info();

// The core generation for the vendor / family / model numbers ("Zen 4", "Sapphire Rapids", ...), or "" for one
// this table does not know.
std::string microarchitecture(const CpuInfo& cpu);
// "AMD EPYC (2 logical CPUs), family 25 model 17: Zen 4": the line benchmarks print beside their numbers.
std::string describe_cpu(const CpuInfo& cpu);

}  // namespace attnzoo
