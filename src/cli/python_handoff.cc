#include "cli/python_handoff.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "core/dispatch.h"
#include "core/threads.h"

namespace attnzoo::cli {
namespace {

std::string python_path() {
  std::string path = std::string(ATTNZOO_SOURCE_DIR) + "/python";
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) path += std::string(":") + old;
  return path;
}

bool python_usable(const std::string& python, const std::string& import_code) {
  if (access(python.c_str(), X_OK) != 0) return false;
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
    }
    execl(python.c_str(), python.c_str(), "-c", import_code.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

void export_child_environment() {
  setenv("PYTHONPATH", python_path().c_str(), 1);
  setenv("ATTNZOO_THREADS", std::to_string(ThreadPool::global().num_threads()).c_str(), 1);
  setenv("ATTNZOO_TARGET", target_name(active_target()), 1);
}

std::optional<std::string> find_python(const std::string& import_code, const std::string& what) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("ATTNZOO_PYTHON"); env && *env) candidates.push_back(env);
  candidates.push_back(std::string(ATTNZOO_SOURCE_DIR) + "/.venv/bin/python");
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
  execv(python.c_str(), argv.data());
  std::fprintf(stderr, "attnzoo: could not run %s\n", python.c_str());
}

}  // namespace attnzoo::cli
