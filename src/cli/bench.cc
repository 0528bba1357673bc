// `attnzoo bench kernels [--quick] [--json] [--no-torch] [--device cpu|cuda[:N]]`, `bench model --device cuda` (the
// GPU runner's decode rows, C++), and `bench model` / `bench serve` otherwise (Python only).
// The full table compares our kernels with PyTorch on identical tensors, which needs both in one process: so
// the CLI hands over to `python -m attnzoo.bench` when a Python that can import attnzoo (and torch) is around,
// and prints the C++-only table otherwise.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "bench/cuda_bench.h"
#include "bench/cuda_model_bench.h"
#include "bench/kernel_cases.h"
#include "bench/report.h"
#include "cli/commands.h"
#include "cli/usage.h"
#include "cli/python_handoff.h"
#include "core/device.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/threads.h"

namespace attnzoo::cli {
namespace {

struct BenchArgs {
  bool quick = false, json = false, no_torch = false;
  Device device{};
  std::string write_cases;  // DIR: write the softmax and linear entries' cases for scripts/check_vs_torch.py instead
};

const char* kBenchUsage =
    "usage: attnzoo bench kernels [--quick] [--json] [--no-torch] [--device cpu|cuda[:N]]\n"
    "         kernel timings vs this machine's measured peaks and vs PyTorch; with --device cuda the CUDA\n"
    "         kernels by CUDA events beside the device's copy bandwidth (scripts/gpu_peers.py adds torch's)\n"
    "       attnzoo bench kernels --write-cases DIR [--device cpu|cuda[:N]]\n"
    "         runs the softmax prefill / decode entries and the linear family's (Gated DeltaNet, KDA, GLA) on\n"
    "         seeded cases on that device and writes their inputs and outputs (.npy + manifest.json) for\n"
    "         scripts/check_vs_torch.py to compare with PyTorch there\n"
    "       attnzoo bench model -m DIR [--prompt N] [--gen N] [--json] ...   (attnzoo bench model --help)\n"
    "         prefill / decode tok/s of a model vs measured peaks\n"
    "       attnzoo bench model -m DIR --device cuda[:N] [--batches 1,64] [--context 1024] [--steps 16]\n"
    "                           [--kv-cache-dtype auto|bfloat16|...] [--json]\n"
    "         decode tok/s on the GPU runner at each batch size over `context`-token sequences, beside the\n"
    "         floor of reading the weights once per step at the device's copy bandwidth (measured in the run)\n"
    "       attnzoo bench serve [--base-url URL] [--num-prompts N] [--request-rate R] ...   (attnzoo bench serve --help)\n"
    "         load generator against a running attnzoo serve (TTFT, TPOT, ITL, throughput)\n";

BenchArgs parse_bench_args(const std::vector<std::string>& args) {
  if (!args.empty() && is_help(args[0])) throw HelpRequested(kBenchUsage);
  if (args.empty() || args[0] != "kernels")
    throw ArgumentError(std::string("bench: expected 'kernels', 'model' or 'serve'\n") + kBenchUsage);
  BenchArgs b;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--quick") b.quick = true;
    else if (args[i] == "--json") b.json = true;
    else if (args[i] == "--no-torch") b.no_torch = true;
    else if (args[i] == "--device") {
      require(i + 1 < args.size(), "--device", "needs a value (cpu, cuda or cuda:N)");
      b.device = parse_device(args[++i], "--device");
    }
    else if (args[i] == "--write-cases") {
      require(i + 1 < args.size(), "--write-cases", "needs a directory");
      b.write_cases = args[++i];
    }
    else if (is_help(args[i])) throw HelpRequested(kBenchUsage);
    else throw_unknown_option("bench kernels", args[i], kBenchUsage);
  }
  return b;
}

int run_cpp_table(const BenchArgs& b, const std::string& why) {
  const bench::Scale scale = b.quick ? bench::Scale::quick : bench::Scale::full;
  std::fprintf(stderr, "  %s: running the C++-only table (peaks + prefill) ...\n", why.c_str());
  bench::KernelReport report = bench::run_cpp_kernel_report(scale);
  report.note = why + ": no PyTorch ratios (C++-only table)";
  std::fputs((b.json ? bench::format_json(report) : bench::format_text(report)).c_str(), stdout);
  return 0;
}

// `bench model ... --device cuda[:N]`: the GPU runner's decode rows in C++ (bench/cuda_model_bench.h), so that a GPU
// machine with the binary alone runs them. Null when the arguments name no CUDA device (the Python bench's).
std::optional<bench::CudaModelBenchOptions> parse_cuda_model_args(const std::vector<std::string>& args) {
  bool cuda = false;
  for (size_t i = 1; i + 1 < args.size(); ++i)
    if (args[i] == "--device" && args[i + 1].rfind("cuda", 0) == 0) cuda = true;
  if (!cuda) return std::nullopt;
  bench::CudaModelBenchOptions o;
  auto value = [&](size_t& i) -> const std::string& {
    require(i + 1 < args.size(), args[i].c_str(), "needs a value");
    return args[++i];
  };
  auto integer = [&](const std::string& text, const std::string& name) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(used == text.size() && !text.empty(), name.c_str(), "expected an integer, got '" + text + "'");
    return v;
  };
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-m" || a == "--model") o.model = value(i);
    else if (a == "--device") o.device = parse_device(value(i), "--device");
    else if (a == "--context") o.context = integer(value(i), a);
    else if (a == "--steps") o.steps = integer(value(i), a);
    else if (a == "--kv-cache-dtype") o.kv_cache_dtype = value(i);
    else if (a == "--json") continue;
    else if (a == "--batches") {
      o.batches.clear();
      const std::string& list = value(i);
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        o.batches.push_back(integer(list.substr(at, comma - at), a));
        at = comma + 1;
      }
    } else if (is_help(a)) throw HelpRequested(kBenchUsage);
    else throw_unknown_option("bench model --device cuda", a, kBenchUsage);
  }
  bench::check_cuda_model_bench(o);
  return o;
}

// `bench model -m DIR ...` loads and times a whole checkpoint (attnzoo.bench.model); `bench serve ...` is a load
// generator against a running `attnzoo serve` (attnzoo.bench.serve). Both modules parse (and report errors in)
// the options themselves.
int run_python_bench(const std::vector<std::string>& args) {
  const std::string module = "attnzoo.bench." + args[0];
  export_child_environment();
  if (const auto python = find_python("import " + module, "attnzoo")) exec_python_module(*python, module, args);
  throw ArgumentError("bench " + args[0] + ": needs a Python that can import attnzoo (set ATTNZOO_PYTHON)");
}

}  // namespace

int run_bench(const std::vector<std::string>& args, const char* argv0) {
  if (!args.empty() && args[0] == "model") {
    if (const auto o = parse_cuda_model_args(args)) {
      const bench::CudaModelReport r = bench::run_cuda_model_bench(*o);
      const bool json = std::find(args.begin(), args.end(), "--json") != args.end();
      std::fputs((json ? bench::format_cuda_model_json(r) + "\n" : bench::format_cuda_model_text(r)).c_str(), stdout);
      return 0;
    }
  }
  if (!args.empty() && (args[0] == "model" || args[0] == "serve")) return run_python_bench(args);
  const BenchArgs b = parse_bench_args(args);
  if (!b.write_cases.empty()) {
    const bench::CaseSummary s = bench::write_kernel_cases(b.write_cases, b.device);
    std::printf("%d cases written to %s on %s (%d refused by this device's entries: see manifest.json)\n", s.written,
                b.write_cases.c_str(), b.device.str().c_str(), s.refused);
    return 0;
  }
  if (b.device.is_cuda()) {
    const bench::Scale scale = b.quick ? bench::Scale::quick : bench::Scale::full;
    const bench::CudaKernelReport r = bench::run_cuda_kernel_report(scale, b.device);
    std::fputs((b.json ? bench::format_cuda_json(r) : bench::format_cuda_text(r)).c_str(), stdout);
    return 0;
  }
  export_child_environment();  // also applies ATTNZOO_TARGET before anything is measured here
  const char* import_code = b.no_torch ? "import attnzoo.bench" : "import torch, attnzoo.bench";
  if (const auto python = find_python(import_code, b.no_torch ? "attnzoo" : "torch and attnzoo")) {
    std::vector<std::string> child = {"kernels"};
    if (b.quick) child.push_back("--quick");
    if (b.json) child.push_back("--json");
    if (b.no_torch) child.push_back("--no-torch");
    exec_python_module(*python, "attnzoo.bench", child);
    std::fprintf(stderr, "attnzoo: falling back\n");
  }
  return run_cpp_table(b, b.no_torch ? "no Python with attnzoo found" : "torch unavailable");
}

}  // namespace attnzoo::cli
