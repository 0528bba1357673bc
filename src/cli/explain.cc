// `attnzoo explain [-m DIR] [--prompt TEXT] [--section NAME ...] [--quick|--full] -o FILE`. The page is
// drawn in Python from real runs of this engine's kernels (attnzoo.explain), so the CLI hands over to
// `python -m attnzoo.explain` with the same threads and SIMD target; the arguments pass through unchanged.
#include <cstdio>

#include "cli/commands.h"
#include "cli/python_handoff.h"

namespace attnzoo::cli {

int run_explain(const std::vector<std::string>& args, const char* argv0) {
  export_child_environment();
  if (const auto python = find_python("import numpy, attnzoo.explain", "numpy and attnzoo.explain")) {
    exec_python_module(*python, "attnzoo.explain", args);
    return 1;  // exec failed; the reason is printed
  }
  std::fprintf(stderr,
               "attnzoo explain: no Python that can import numpy and attnzoo.explain was found (tried "
               "$ATTNZOO_PYTHON, the checkout's .venv, python3 beside this program and on PATH); pip install "
               "attnzoo into it, run scripts/setup.sh in a checkout, or set ATTNZOO_PYTHON\n");
  return 1;
}

}  // namespace attnzoo::cli
