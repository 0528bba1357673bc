// `attnzoo conformance [--quick|--full] [-m PATH ...] [--llama-perplexity PATH] [--json FILE] [--html FILE]`. The
// references it compares against (torch, fla, transformers, the gguf package, HF tokenizers) are Python packages,
// so the CLI hands over to `python -m attnzoo.conformance` with the same threads and SIMD target; the arguments
// pass through unchanged. numpy alone is enough to start: a missing reference is a skipped row of the report.
#include "cli/commands.h"
#include "cli/python_handoff.h"

namespace attnzoo::cli {

int run_conformance(const std::vector<std::string>& args) {
  return hand_over_to_python("conformance", "attnzoo.conformance", args);
}

}  // namespace attnzoo::cli
