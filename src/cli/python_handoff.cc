#include "cli/python_handoff.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "bench/blas_class.h"
#include "core/dispatch.h"
#include "core/threads.h"

namespace attnzoo::cli {
namespace {

namespace fs = std::filesystem;

// The directory this executable sits in (empty if unknown).
fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// The binary the checkout's build made, still in its build tree: it runs the checkout's Python package (sources
// in python/, the compiled module in <build>/python). Any other copy (pip's, cmake --install's) relies on the
// attnzoo package installed beside its Python.
bool in_build_tree() {
  std::error_code ec;
  const fs::path dir = executable_dir();
  return !dir.empty() && fs::equivalent(dir, fs::path(ATTNZOO_BINARY_DIR), ec) &&
         fs::exists(fs::path(ATTNZOO_SOURCE_DIR) / "python" / "attnzoo" / "__init__.py", ec);
}

std::string python_path() {
  std::string path;
  if (in_build_tree()) path = std::string(ATTNZOO_SOURCE_DIR) + "/python:" + ATTNZOO_BINARY_DIR + "/python";
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) path += (path.empty() ? "" : ":") + std::string(old);
  return path;
}

bool python_usable(const std::string& python, const std::string& import_code) {
  const bool bare = python.find('/') == std::string::npos;  // a name looked up on PATH
  if (!bare && access(python.c_str(), X_OK) != 0) return false;
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
    }
    execlp(python.c_str(), python.c_str(), "-c", import_code.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

void export_child_environment() {
  if (const std::string path = python_path(); !path.empty()) setenv("PYTHONPATH", path.c_str(), 1);
  setenv("ATTNZOO_THREADS", std::to_string(ThreadPool::global().num_threads()).c_str(), 1);
  setenv("ATTNZOO_TARGET", target_name(active_target()), 1);
  // A target forced below the CPU's imitates an older class: torch and OpenBLAS are held to it too, unless the
  // environment already says otherwise.
  for (const auto& [name, value] : bench::class_environment(active_target(), supported_targets().front()))
    setenv(name.c_str(), value.c_str(), 0);
}

std::optional<std::string> find_python(const std::string& import_code, const std::string& what) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("ATTNZOO_PYTHON"); env && *env) candidates.push_back(env);
  if (in_build_tree()) candidates.push_back(std::string(ATTNZOO_SOURCE_DIR) + "/.venv/bin/python");
  // pip installs this binary into the scripts directory of the environment that holds the package.
  if (const fs::path dir = executable_dir(); !dir.empty()) {
    candidates.push_back((dir / "python3").string());
    candidates.push_back((dir / "python").string());
  }
  candidates.push_back("python3");
  for (const std::string& python : candidates) {
    if (python_usable(python, import_code)) return python;
    if (python == candidates.front() && std::getenv("ATTNZOO_PYTHON"))
      std::fprintf(stderr, "attnzoo: ATTNZOO_PYTHON=%s cannot import %s; looking further\n", python.c_str(),
                   what.c_str());
  }
  return std::nullopt;
}

void exec_python_module(const std::string& python, const std::string& module, const std::vector<std::string>& args) {
  std::vector<std::string> child = {python, "-m", module};
  child.insert(child.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : child) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  execvp(python.c_str(), argv.data());
  std::fprintf(stderr, "attnzoo: could not run %s\n", python.c_str());
}

int hand_over_to_python(const std::string& command, const std::string& module, const std::vector<std::string>& args) {
  export_child_environment();
  if (const auto python = find_python("import numpy, " + module, "numpy and " + module)) {
    exec_python_module(*python, module, args);
    return 1;  // exec failed; the reason is printed
  }
  std::fprintf(stderr,
               "attnzoo %s: no Python that can import numpy and %s was found (tried $ATTNZOO_PYTHON, the checkout's "
               ".venv, python3 beside this program and on PATH); pip install attnzoo into it, run scripts/setup.sh "
               "in a checkout, or set ATTNZOO_PYTHON\n",
               command.c_str(), module.c_str());
  return 1;
}

}  // namespace attnzoo::cli
