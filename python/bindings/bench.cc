// Bindings for the benchmark harness: the machine probes, the shared timing policy and the benchmark
// shapes, so the Python-driven kernel table (attnzoo.bench) and the C++ one measure the same way.
#include <nanobind/stl/string.h>

#include "bench/kernel_bench.h"
#include "bench/peak.h"
#include "bench/timer.h"
#include "bindings.h"
#include "core/dispatch.h"
#include "core/error.h"

namespace attnzoo::py {
namespace {
using namespace attnzoo::bench;

nb::dict timing_dict(const Timing& t) {
  nb::dict d;
  d["median_s"] = t.median_s;
  d["min_s"] = t.min_s;
  d["max_s"] = t.max_s;
  d["runs"] = t.runs;
  return d;
}

nb::dict config_dict(Scale s) {
  const PrefillShape p = prefill_shape(s);
  const DecodeShape dc = decode_shape(s);
  const TimingPolicy t = timing_policy(s);
  const ProbeSettings pr = probe_settings(s);
  nb::dict sparse;
  sparse["block"] = p.sparse.block;
  sparse["local_blocks"] = p.sparse.local_blocks;
  sparse["global_tokens"] = p.sparse.global_tokens;
  sparse["stride"] = p.sparse.stride;
  sparse["random_blocks"] = p.sparse.random_blocks;
  sparse["seed"] = p.sparse.seed;
  nb::dict prefill;
  prefill["T"] = p.T;
  prefill["Hq"] = p.Hq;
  prefill["Hkv"] = p.Hkv;
  prefill["D"] = p.D;
  prefill["window"] = p.window;
  prefill["block_sparse"] = sparse;
  nb::dict decode;
  decode["context"] = dc.context;
  decode["Hq"] = dc.Hq;
  decode["Hkv"] = dc.Hkv;
  decode["D"] = dc.D;
  decode["page_block"] = dc.page_block;
  nb::dict timing;
  timing["warmup"] = t.warmup;
  timing["min_runs"] = t.min_runs;
  timing["max_runs"] = t.max_runs;
  timing["min_seconds"] = t.min_seconds;
  nb::dict probes;
  probes["fma_seconds"] = pr.fma_seconds;
  probes["fma_runs"] = pr.fma_runs;
  probes["memory_bytes"] = pr.memory_bytes;
  probes["memory_runs"] = pr.memory_runs;
  nb::dict d;
  d["scale"] = scale_name(s);
  d["prefill"] = prefill;
  d["decode"] = decode;
  d["timing"] = timing;
  d["probes"] = probes;
  return d;
}

}  // namespace

void bind_bench(nb::module_& m) {
  auto peak_dict = [](const FmaPeak& p) {
    nb::dict d;
    d["gflops"] = p.gflops;
    d["gflops_per_thread"] = p.gflops_per_thread;
    d["threads"] = p.threads;
    d["lanes"] = p.lanes;
    d["chains"] = p.chains;
    d["target"] = target_name(p.target);
    d["seconds"] = p.seconds;
    d["runs"] = p.runs;
    d["avx_vnni"] = p.avx_vnni;
    return d;
  };
  auto bind_peak = [&m, peak_dict](const char* name, FmaPeak (*measure)(double, int), const char* doc) {
    m.def(name,
          [measure, peak_dict](double seconds, int runs) {
            FmaPeak p;
            {
              KernelScope scope;
              p = measure(seconds, runs);
            }
            return peak_dict(p);
          },
          nb::arg("seconds") = 0.25, nb::arg("runs") = 3, doc);
  };
  bind_peak("measure_fma_peak", measure_fma_peak,
            "f32 FMA throughput of the active target on every thread (best of `runs` runs of ~`seconds` each).");
  bind_peak("measure_bf16_dot_peak", measure_bf16_dot_peak,
            "bf16-product (vdpbf16ps) throughput on every thread; gflops 0 where the CPU or target lacks "
            "AVX-512-BF16.");
  bind_peak("measure_amx_bf16_peak", measure_amx_bf16_peak,
            "bf16-product throughput on AMX tiles (tdpbf16ps) on every thread; gflops 0 where the tiles do not run "
            "(no AMX, ATTNZOO_AMX=0, or a target below avx512_bf16).");
  bind_peak("measure_vnni_int8_peak", measure_vnni_int8_peak,
            "8-bit integer product (vpdpbusd) throughput on every thread, in giga-operations as 'gflops'; 0 where "
            "the CPU lacks AVX-512 VNNI or the target is below AVX-512.");
  m.def(
      "measure_avx2_int8_peak",
      [peak_dict](double seconds, int runs, bool avx_vnni) {
        FmaPeak p;
        {
          KernelScope scope;
          p = measure_avx2_int8_peak(seconds, runs, avx_vnni);
        }
        return peak_dict(p);
      },
      nb::arg("seconds") = 0.25, nb::arg("runs") = 3, nb::arg("avx_vnni") = false,
      "8-bit integer product throughput of the AVX2 integer rows (vpmaddubsw + vpmaddwd + vpaddd per 32 products; "
      "with avx_vnni=True, the regrouped rows' AVX-VNNI vpdpbusd where the CPU has it: the result's 'avx_vnni') on "
      "every thread; 0 where no AVX2 / AVX-512 target is active (the scalar target).");
  m.def("measure_memory_bandwidth",
        [](int64_t bytes, int runs) {
          MemoryBandwidth b;
          {
            KernelScope scope;
            b = measure_memory_bandwidth(bytes, runs);
          }
          nb::dict d;
          d["gbps"] = b.gbps;
          d["bytes"] = b.bytes;
          d["threads"] = b.threads;
          d["seconds"] = b.seconds;
          d["runs"] = b.runs;
          return d;
        },
        nb::arg("bytes"), nb::arg("runs") = 3,
        "Streaming read bandwidth (GB/s) of a `bytes` buffer on every thread, best of `runs`.");
  m.def("median_time",
        [](nb::callable fn, int warmup, int min_runs, int max_runs, double min_seconds) {
          require(warmup >= 0, "warmup", "must be >= 0");
          require(min_runs >= 1, "min_runs", "must be >= 1");
          require(max_runs >= min_runs, "max_runs", "must be >= min_runs");
          require(min_seconds >= 0, "min_seconds", "must be >= 0");
          return timing_dict(time_median([&] { fn(); }, {warmup, min_runs, max_runs, min_seconds}));
        },
        nb::arg("fn"), nb::arg("warmup"), nb::arg("min_runs"), nb::arg("max_runs"), nb::arg("min_seconds"),
        "Calls fn() `warmup` times, then times it until min_runs and min_seconds are reached (at most "
        "max_runs); returns median/min/max seconds and the run count.");
  m.def("bench_config", [](const std::string& scale) { return config_dict(parse_scale(scale)); },
        nb::arg("scale"), "Shapes, timing policy and probe sizes of a benchmark scale: full, quick or tiny.");
  m.def("count_visible_pairs",
        [](int64_t Tq, int64_t Tk, bool causal, int64_t window, const BlockMask* block_mask) {
          require(Tq >= 0 && Tk >= 0, "Tq", "lengths must be >= 0");
          require(window >= 0, "window", "must be >= 0 (0: no window)");
          return count_visible_pairs(MaskGeometry{causal, window, block_mask}, Tq, Tk);
        },
        nb::arg("Tq"), nb::arg("Tk"), nb::arg("causal"), nb::arg("window") = 0,
        nb::arg("block_mask").none() = nb::none(),
        "Visible (query, key) pairs of one head under the mask (queries bottom-right aligned).");
  m.def("bench_prefill_cases",
        [](const std::string& scale) {
          const Scale s = parse_scale(scale);
          std::vector<KernelResult> rows;
          {
            KernelScope scope;
            rows = bench_prefill_cases(s);
          }
          nb::list out;
          for (const KernelResult& r : rows) {
            nb::dict d;
            d["kernel"] = r.kernel;
            d["name"] = r.name;
            d["shape"] = r.shape;
            d["flops"] = r.flops;
            d["timing"] = timing_dict(r.timing);
            out.append(d);
          }
          return out;
        },
        nb::arg("scale"), "The C++-only prefill table (what the CLI prints without PyTorch).");
}

}  // namespace attnzoo::py
