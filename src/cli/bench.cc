// `attnzoo bench kernels [--quick] [--json] [--no-torch]`. The full table compares our kernels with PyTorch on
// identical tensors, which needs both in one process: so the CLI hands over to `python -m attnzoo.bench`
// when a Python that can import attnzoo (and torch) is around, and prints the C++-only table otherwise.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "bench/report.h"
#include "cli/commands.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/threads.h"

namespace attnzoo::cli {
namespace {

struct BenchArgs {
  bool quick = false, json = false, no_torch = false;
};

BenchArgs parse_bench_args(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "kernels")
    throw ArgumentError("bench: expected 'kernels' (usage: attnzoo bench kernels [--quick] [--json] [--no-torch])");
  BenchArgs b;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--quick") b.quick = true;
    else if (args[i] == "--json") b.json = true;
    else if (args[i] == "--no-torch") b.no_torch = true;
    else throw ArgumentError("bench kernels: unknown option '" + args[i] + "'");
  }
  return b;
}

std::string python_path() {
  std::string path = std::string(ATTNZOO_SOURCE_DIR) + "/python";
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) path += std::string(":") + old;
  return path;
}

// The child inherits these, so it runs on the threads and SIMD target this command was given.
void export_child_environment() {
  setenv("PYTHONPATH", python_path().c_str(), 1);
  setenv("ATTNZOO_THREADS", std::to_string(ThreadPool::global().num_threads()).c_str(), 1);
  setenv("ATTNZOO_TARGET", target_name(active_target()), 1);
}

// Whether `python` can import what the benchmark needs (checked in a child with its output silenced).
bool python_usable(const std::string& python, bool need_torch) {
  if (access(python.c_str(), X_OK) != 0) return false;
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
    }
    const char* code = need_torch ? "import torch, attnzoo.bench" : "import attnzoo.bench";
    execl(python.c_str(), python.c_str(), "-c", code, static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::optional<std::string> find_python(bool need_torch) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("ATTNZOO_PYTHON"); env && *env) candidates.push_back(env);
  candidates.push_back(std::string(ATTNZOO_SOURCE_DIR) + "/.venv/bin/python");
  for (const std::string& python : candidates) {
    if (python_usable(python, need_torch)) return python;
    if (python == candidates.front() && std::getenv("ATTNZOO_PYTHON"))
      std::fprintf(stderr, "attnzoo: ATTNZOO_PYTHON=%s cannot import %s; looking further\n", python.c_str(),
                   need_torch ? "torch and attnzoo" : "attnzoo");
  }
  return std::nullopt;
}

int run_cpp_table(const BenchArgs& b, const std::string& why) {
  const bench::Scale scale = b.quick ? bench::Scale::quick : bench::Scale::full;
  std::fprintf(stderr, "  %s: running the C++-only table (peaks + prefill) ...\n", why.c_str());
  bench::KernelReport report = bench::run_cpp_kernel_report(scale);
  report.note = why + ": no PyTorch ratios (C++-only table)";
  std::fputs((b.json ? bench::format_json(report) : bench::format_text(report)).c_str(), stdout);
  return 0;
}

}  // namespace

int run_bench(const std::vector<std::string>& args, const char* argv0) {
  const BenchArgs b = parse_bench_args(args);
  export_child_environment();  // also applies ATTNZOO_TARGET before anything is measured here
  if (const auto python = find_python(!b.no_torch)) {
    std::vector<std::string> child = {*python, "-m", "attnzoo.bench", "kernels"};
    if (b.quick) child.push_back("--quick");
    if (b.json) child.push_back("--json");
    if (b.no_torch) child.push_back("--no-torch");
    std::vector<char*> argv;
    for (std::string& s : child) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::fflush(nullptr);
    execv(python->c_str(), argv.data());
    std::fprintf(stderr, "attnzoo: could not run %s; falling back\n", python->c_str());
  }
  return run_cpp_table(b, b.no_torch ? "no Python with attnzoo found" : "torch unavailable");
}

}  // namespace attnzoo::cli
