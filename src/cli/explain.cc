#include <cstdio>

#include "cli/commands.h"

namespace attnzoo::cli {

int run_explain(const std::vector<std::string>& args, const char* argv0) {
  std::fputs("attnzoo explain: not available yet\n", stderr);
  return 2;
}

}  // namespace attnzoo::cli
