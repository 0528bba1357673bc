#pragma once
// Commands whose work lives in Python (bench kernels with PyTorch peers, explain) hand over to
// `python -m attnzoo.<module>` with the same threads and SIMD target this process was given.
#include <optional>
#include <string>
#include <vector>

namespace attnzoo::cli {

// Sets ATTNZOO_THREADS and ATTNZOO_TARGET for the child (with a target forced below the CPU's, also the unset ones
// of ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS, OPENBLAS_CORETYPE that hold torch and OpenBLAS to its class)
// and, for the binary in its checkout's build tree, puts the checkout's python/ and <build>/python first on
// PYTHONPATH (an installed binary uses the installed package).
void export_child_environment();
// The first of $ATTNZOO_PYTHON, <checkout>/.venv/bin/python (build-tree binary only), python3 / python beside this
// executable (a pip install puts it in the environment's bin/), python3 on PATH that runs `import_code` without
// error (checked in a silenced child); `what` names the requirement in the message printed when $ATTNZOO_PYTHON
// falls short.
std::optional<std::string> find_python(const std::string& import_code, const std::string& what);
// Replaces this process with `python -m module args...`; returns only if exec failed.
void exec_python_module(const std::string& python, const std::string& module, const std::vector<std::string>& args);
// The whole hand-over of a command that lives in Python (`attnzoo <command>` -> `python -m <module> args...`, with
// numpy and the module importable): returns 1 with the reason printed when no such Python is found or exec failed.
int hand_over_to_python(const std::string& command, const std::string& module, const std::vector<std::string>& args);

}  // namespace attnzoo::cli
