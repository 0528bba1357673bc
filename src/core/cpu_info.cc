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

int parse_int(const std::string& s) {
  int v = 0;
  bool any = false;
  for (char c : s) {
    if (c < '0' || c > '9') break;
    v = v * 10 + (c - '0');
    any = true;
  }
  return any ? v : -1;
}

}  // namespace

std::string microarchitecture(const CpuInfo& c) {
  const int m = c.model_number;
  if (c.vendor == "AuthenticAMD") {
    if (c.family == 23) return m >= 0x30 ? "Zen 2" : "Zen / Zen+";
    if (c.family == 25) {
      if ((m >= 0x10 && m <= 0x1f) || (m >= 0x60 && m <= 0x7f) || (m >= 0xa0 && m <= 0xaf)) return "Zen 4";
      return "Zen 3";
    }
    if (c.family == 26) return "Zen 5";
  }
  if (c.vendor == "GenuineIntel" && c.family == 6) {
    switch (m) {
      case 0x55: return "Skylake-SP / Cascade Lake / Cooper Lake";
      case 0x6a: case 0x6c: return "Ice Lake-SP";
      case 0x8f: return "Sapphire Rapids";
      case 0xcf: return "Emerald Rapids";
      case 0xad: case 0xae: return "Granite Rapids";
      case 0x3f: return "Haswell-EP";
      case 0x4f: return "Broadwell-EP";
      case 0x97: case 0x9a: return "Alder Lake";
      case 0xb7: case 0xba: case 0xbf: return "Raptor Lake";
      default: break;
    }
  }
  return "";
}

std::string describe_cpu(const CpuInfo& c) {
  std::string s = (c.model.empty() ? std::string("unknown CPU") : c.model) + " (" + std::to_string(c.logical_cpus) +
                  " logical CPUs)";
  if (c.family >= 0 && c.model_number >= 0) {
    s += ", family " + std::to_string(c.family) + " model " + std::to_string(c.model_number);
    const std::string arch = microarchitecture(c);
    if (!arch.empty()) s += ": " + arch;
  }
  return s;
}

CpuInfo read_cpu_info() {
  CpuInfo info;
  info.logical_cpus = int(std::thread::hardware_concurrency());
  std::ifstream cpuinfo("/proc/cpuinfo");
  // The first processor's block only: it ends at the first blank line.
  for (std::string line; std::getline(cpuinfo, line) && !line.empty();) {
    const auto pos = line.find(':');
    if (pos == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", pos - 1) + 1);
    const std::string value = pos + 2 <= line.size() ? line.substr(pos + 2) : "";
    if (key == "model name") info.model = value;
    else if (key == "vendor_id") info.vendor = value;
    else if (key == "cpu family") info.family = parse_int(value);
    else if (key == "model") info.model_number = parse_int(value);
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
