#include <cstdio>

#include "cli/commands.h"

namespace attnzoo::cli {

int run_bench(const std::vector<std::string>& args, const char* argv0) {
  std::puts("bench: not built yet");
  return 1;
}

}  // namespace attnzoo::cli
