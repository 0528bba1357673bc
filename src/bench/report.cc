#include "bench/report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/cpu_info.h"
#include "core/dispatch.h"
#include "core/threads.h"

namespace attnzoo::bench {
namespace {

std::string printf_string(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += printf_string("\\u%04x", int(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_number(double x) { return printf_string("%.6g", x); }

// The machine may be shared: a busy one explains low numbers, so the report shows how busy it was.
double load_average() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : 0.0;
}

double fraction_of_peak(const KernelResult& r, const KernelReport& rep) {
  return r.flops / r.timing.median_s * 1e-9 / rep.fma.gflops;
}

// "target met (...)" / "target missed (...)"; PyTorch goals cannot be judged here and say so.
std::string goal_text(const KernelResult& r, const KernelReport& rep) {
  if (r.goal_fraction_of_peak <= 0 && r.goal_torch_ratio <= 0) return "";
  std::string detail;
  bool missed = false;
  if (r.goal_fraction_of_peak > 0) {
    const bool met = fraction_of_peak(r, rep) >= r.goal_fraction_of_peak;
    missed |= !met;
    detail += printf_string(">=%.0f%% of peak%s", 100 * r.goal_fraction_of_peak, met ? "" : " MISSED");
  }
  if (r.goal_torch_ratio > 0)
    detail += printf_string("%s>=%gx torch n/a", detail.empty() ? "" : ", ", r.goal_torch_ratio);
  return std::string(missed ? "target missed" : "target met") + " (" + detail + ")";
}

}  // namespace

KernelReport run_cpp_kernel_report(Scale scale) {
  KernelReport r;
  r.scale = scale;
  const ProbeSettings probes = probe_settings(scale);
  r.fma = measure_fma_peak(probes.fma_seconds, probes.fma_runs);
  r.memory = measure_memory_bandwidth(probes.memory_bytes, probes.memory_runs);
  r.rows = bench_prefill_cases(scale);
  // On a shared machine a probe can land in a busy moment: probe again at the end and keep the better one.
  const FmaPeak fma = measure_fma_peak(probes.fma_seconds, probes.fma_runs);
  if (fma.gflops > r.fma.gflops) r.fma = fma;
  const MemoryBandwidth memory = measure_memory_bandwidth(probes.memory_bytes, probes.memory_runs);
  if (memory.gbps > r.memory.gbps) r.memory = memory;
  return r;
}

std::string format_text(const KernelReport& r) {
  const CpuInfo cpu = read_cpu_info();
  const TimingPolicy policy = timing_policy(r.scale);
  std::string out =
      printf_string("attnzoo bench kernels (%s): %s, %d threads, target %s, no torch, load average %.1f\n",
                    scale_name(r.scale), describe_cpu(cpu).c_str(), ThreadPool::global().num_threads(),
                    target_name(active_target()), load_average());
  out += printf_string("peak f32 FMA    %8.1f GFLOP/s  (%.1f per thread, %d lanes x %d chains, %s, "
                       "best of %d at start and end)\n",
                       r.fma.gflops, r.fma.gflops_per_thread, r.fma.lanes, r.fma.chains, target_name(r.fma.target),
                       r.fma.runs);
  out += printf_string("memory read     %8.1f GB/s     (%lld MiB, %d threads, best of %d at start and end)\n",
                       r.memory.gbps,
                       (long long)(r.memory.bytes >> 20), r.memory.threads, r.memory.runs);
  out += printf_string("times: median of >= %d runs after %d warm-up\n\n", policy.min_runs, policy.warmup);

  std::vector<std::vector<std::string>> table = {{"kernel", "case", "shape", "ms", "rate", "of peak", ""}};
  for (const KernelResult& k : r.rows) {
    table.push_back({k.kernel, k.name, k.shape, printf_string("%.2f", k.timing.median_s * 1e3),
                     printf_string("%.1f GFLOP/s", k.flops / k.timing.median_s * 1e-9),
                     printf_string("%.1f%%", 100 * fraction_of_peak(k, r)), goal_text(k, r)});
  }
  std::vector<size_t> width(6, 0);
  for (const auto& row : table)
    for (size_t i = 0; i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  for (const auto& row : table) {
    std::string line;
    for (size_t i = 0; i < width.size(); ++i) {
      const std::string pad(width[i] - row[i].size(), ' ');
      line += (i >= 3 ? pad + row[i] : row[i] + pad) + "  ";
    }
    line += row.back();
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  if (!r.note.empty()) out += "\n" + r.note + "\n";
  return out;
}

std::string format_json(const KernelReport& r) {
  const CpuInfo cpu = read_cpu_info();
  const TimingPolicy policy = timing_policy(r.scale);
  std::string out = "{\n";
  out += "  \"scale\": " + json_string(scale_name(r.scale)) + ",\n";
  out += "  \"machine\": {\"cpu\": " + json_string(cpu.model) +
         ", \"microarchitecture\": " + json_string(microarchitecture(cpu)) +
         ", \"cpu_description\": " + json_string(describe_cpu(cpu)) +
         printf_string(", \"threads\": %d, \"target\": ", ThreadPool::global().num_threads()) +
         json_string(target_name(active_target())) + ", \"load_average\": " + json_number(load_average()) +
         ", \"torch\": null, \"torch_threads\": null},\n";
  out += printf_string("  \"timing\": {\"warmup\": %d, \"min_runs\": %d, \"max_runs\": %d, \"min_seconds\": %g},\n",
                       policy.warmup, policy.min_runs, policy.max_runs, policy.min_seconds);
  out += "  \"peaks\": {\n    \"fma\": {\"gflops\": " + json_number(r.fma.gflops) +
         ", \"gflops_per_thread\": " + json_number(r.fma.gflops_per_thread) +
         printf_string(", \"threads\": %d, \"lanes\": %d, \"chains\": %d, \"target\": ", r.fma.threads, r.fma.lanes,
                       r.fma.chains) +
         json_string(target_name(r.fma.target)) + ", \"seconds\": " + json_number(r.fma.seconds) +
         printf_string(", \"runs\": %d},\n", r.fma.runs);
  out += "    \"memory\": {\"gbps\": " + json_number(r.memory.gbps) +
         printf_string(", \"bytes\": %lld, \"threads\": %d, \"seconds\": ", (long long)r.memory.bytes,
                       r.memory.threads) +
         json_number(r.memory.seconds) + printf_string(", \"runs\": %d}\n  },\n", r.memory.runs);
  out += "  \"rows\": [";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const KernelResult& k = r.rows[i];
    const double gflops = k.flops / k.timing.median_s * 1e-9;
    out += std::string(i ? "," : "") + "\n    {\"kernel\": " + json_string(k.kernel) + ", \"name\": " +
           json_string(k.name) + ", \"shape\": " + json_string(k.shape) +
           ", \"time_ms\": " + json_number(k.timing.median_s * 1e3) + printf_string(", \"runs\": %d", k.timing.runs) +
           ", \"gflops\": " + json_number(gflops) + ", \"gbps\": null, \"peak\": \"fma\", \"fraction_of_peak\": " +
           json_number(fraction_of_peak(k, r)) +
           ", \"torch_ms\": null, \"torch_ratio\": null, \"rel_error_vs_torch\": null, \"goals\": [";
    std::string goals;
    if (k.goal_fraction_of_peak > 0)
      goals += printf_string("{\"goal\": \">=%.0f%% of peak\", \"met\": %s}", 100 * k.goal_fraction_of_peak,
                             fraction_of_peak(k, r) >= k.goal_fraction_of_peak ? "true" : "false");
    if (k.goal_torch_ratio > 0)
      goals += printf_string("%s{\"goal\": \">=%gx torch\", \"met\": null}", goals.empty() ? "" : ", ",
                             k.goal_torch_ratio);
    out += goals + "], \"note\": \"\"}";
  }
  out += "\n  ],\n  \"note\": " + json_string(r.note) + "\n}\n";
  return out;
}

}  // namespace attnzoo::bench
