#pragma once
// `attnzoo bench kernels --device D --write-cases DIR`: the softmax entries (varlen prefill, paged decode over
// bf16 / int8 / fp8 caches), the linear family's (kernel_cases_linear.h) and a model step's kernels
// (kernel_cases_step.h) run on seeded random inputs on device D, each case's inputs and our output written as .npy files beside a manifest.json. scripts/check_vs_torch.py
// reads them back into PyTorch on the same device and compares with its own attention and recurrences (and SDPA /
// fla where they can express the case): on a GPU machine that is the CUDA kernels against torch on that GPU,
// where our Python module (built for another Python) cannot be carried; on a CPU it is the same check of the CPU
// kernels (CI runs it, so the script cannot rot).
#include <string>

#include "core/device.h"

namespace attnzoo::bench {

struct CaseSummary {
  int written = 0;  // cases whose output was written
  int refused = 0;  // cases the entry refused on this device (the manifest keeps the message)
};

// Writes DIR/manifest.json and the .npy files (DIR is created). A case the entry refuses is recorded with its
// error instead of an output; other errors propagate.
CaseSummary write_kernel_cases(const std::string& dir, Device device);

}  // namespace attnzoo::bench
