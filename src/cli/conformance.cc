// `attnzoo conformance [--quick|--full] [-m PATH ...] [--llama-perplexity PATH] [--json FILE] [--html FILE]`. The
// references it compares against (torch, fla, transformers, the gguf package, HF tokenizers) are Python packages,
// so the CLI hands over to `python -m attnzoo.conformance` with the same threads and SIMD target; the arguments
// pass through unchanged.
#include <cstdio>

#include "cli/commands.h"
#include "cli/python_handoff.h"

namespace attnzoo::cli {

int run_conformance(const std::vector<std::string>& args) {
  export_child_environment();
  // numpy alone is enough to start: a missing reference package is a skipped row of the report, not a refusal.
  if (const auto python = find_python("import numpy, attnzoo.conformance", "numpy and attnzoo.conformance")) {
    exec_python_module(*python, "attnzoo.conformance", args);
    return 1;  // exec failed; the reason is printed
  }
  std::fprintf(stderr,
               "attnzoo conformance: no Python that can import numpy and attnzoo.conformance was found (tried "
               "$ATTNZOO_PYTHON, the checkout's .venv, python3 beside this program and on PATH); pip install "
               "attnzoo into it, run scripts/setup.sh in a checkout, or set ATTNZOO_PYTHON\n");
  return 1;
}

}  // namespace attnzoo::cli
