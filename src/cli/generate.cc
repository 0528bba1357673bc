#include <cstdio>

#include "cli/commands.h"

namespace attnzoo::cli {

int run_generate(const std::vector<std::string>& args) {
  std::fputs("attnzoo generate: not available yet\n", stderr);
  return 2;
}

}  // namespace attnzoo::cli
