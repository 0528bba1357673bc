// `attnzoo explain [-m DIR] [--prompt TEXT] [--section NAME ...] [--quick|--full] -o FILE`. The page is
// drawn in Python from real runs of this engine's kernels (attnzoo.explain), so the CLI hands over to
// `python -m attnzoo.explain` with the same threads and SIMD target; the arguments pass through unchanged.
#include "cli/commands.h"
#include "cli/python_handoff.h"

namespace attnzoo::cli {

int run_explain(const std::vector<std::string>& args, const char* /*argv0*/) {
  return hand_over_to_python("explain", "attnzoo.explain", args);
}

}  // namespace attnzoo::cli
