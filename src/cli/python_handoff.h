#pragma once
// Commands whose work lives in Python (bench kernels with PyTorch peers, explain) hand over to
// `python -m attnzoo.<module>` with the same threads and SIMD target this process was given.
#include <optional>
#include <string>
#include <vector>

namespace attnzoo::cli {

// Sets PYTHONPATH (the source tree's python/ first), ATTNZOO_THREADS and ATTNZOO_TARGET for the child.
void export_child_environment();
// The first of $ATTNZOO_PYTHON, <source>/.venv/bin/python that runs `import_code` without error (checked in a
// silenced child); `what` names the requirement in the message printed when $ATTNZOO_PYTHON falls short.
std::optional<std::string> find_python(const std::string& import_code, const std::string& what);
// Replaces this process with `python -m module args...`; returns only if exec failed.
void exec_python_module(const std::string& python, const std::string& module, const std::vector<std::string>& args);

}  // namespace attnzoo::cli
