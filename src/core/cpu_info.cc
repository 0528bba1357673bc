#include "core/cpu_info.h"

#include <fstream>
#include <string>
#include <thread>

namespace attnzoo {
namespace {

int64_t parse_size(const std::string& s) {
  if (s.empty()) return 0;
  int64_t v = std::stoll(s);
  const char unit = s.back();
  if (unit == 'K') v <<= 10;
  if (unit == 'M') v <<= 20;
  return v;
}

}  // namespace

CpuInfo read_cpu_info() {
  CpuInfo info;
  info.logical_cpus = int(std::thread::hardware_concurrency());
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) info.model = line.substr(pos + 2);
      break;
    }
  }
  for (int idx = 0; idx < 8; ++idx) {
    const std::string base = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/";
    std::ifstream level_f(base + "level"), type_f(base + "type"), size_f(base + "size");
    if (!level_f) break;
    int level = 0;
    std::string type, size;
    level_f >> level;
    type_f >> type;
    size_f >> size;
    const int64_t bytes = parse_size(size);
    if (level == 1 && type == "Data") info.l1d_bytes = bytes;
    if (level == 2) info.l2_bytes = bytes;
    if (level == 3) info.l3_bytes = bytes;
  }
  return info;
}

}  // namespace attnzoo
