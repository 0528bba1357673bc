#pragma once
// The linear family's cases for `attnzoo bench kernels --write-cases` (issue 26): Gated DeltaNet, KDA and GLA
// through their public recurrent entries (one-token decode batches and ragged packed sequences, initial states,
// strong and mild decays, grouped value heads), Gated DeltaNet's and GLA's chunked prefill, RWKV-7's recurrence
// (recurrent_rwkv7) and the causal conv1d prefill (causal_conv1d), each case's inputs, output and final state
// written as .npy beside the softmax cases. scripts/check_linear_vs_torch.py recomputes them
// with the plain recurrence in float64 torch (fla's math and layout) and sets fla's own functions beside it.
#include <filesystem>
#include <functional>
#include <string>

#include "core/device.h"

namespace attnzoo::bench {

// Runs every linear case on `device`, writes its files into `dir` and hands each manifest entry to `add` (with
// whether the entry refused the case). `seed` advances per case, as the softmax cases' does.
void write_linear_cases(const std::filesystem::path& dir, Device device, uint32_t& seed,
                        const std::function<void(const std::string& entry, bool refused)>& add);

}  // namespace attnzoo::bench
