#pragma once
// The GPU runner's newer kernels for `attnzoo bench kernels --write-cases` (issues 25-27), each through the entry
// the runner calls on the case's device, its CPU twin on the CPU: a MoE feed-forward's routed half (the f32
// router, the softmax top-k, the grouping by expert, the grouped GEMMs and the combine; Qwen3-MoE's 128 experts
// top-8, and Qwen2-MoE's 60 top-4 with a gated shared expert's output), the GGUF blocks' bf16 expansion
// (quant_dequant_cuda, every block format), the delta family's gates (Gated DeltaNet's per head, KDA's per key
// channel), and the small element-wise / copy kernels (mul, sigmoid gate, add_scaled, scale_softcap, query
// temperature, transpose, row copy). scripts/check_layers_vs_torch.py recomputes each independently: the MoE
// densely per token in float64, the blocks with gguf-py, the gates and the element-wise kernels with torch's own
// functions as transformers / fla write them.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "core/device.h"

namespace attnzoo::bench {

// Runs every case on `device`, writes its files into `dir` and hands each manifest entry to `add`.
void write_moe_cases(const std::filesystem::path& dir, Device device, uint32_t& seed,
                     const std::function<void(const std::string& entry, bool refused)>& add);
void write_layer_cases(const std::filesystem::path& dir, Device device, uint32_t& seed,
                       const std::function<void(const std::string& entry, bool refused)>& add);
// The runners' own kernels (kernel_cases_runner.cc): RWKV-7's token shift and lerps over pool slots, its
// activations, key preparation and gated group norm + bonus; gpt-oss's grouped bias and clamped SwiGLU;
// copy_head_rows' gathers, pads and broadcast; the MoE grouping past one CTA. scripts/check_runner_vs_torch.py
// recomputes them as fla / transformers write them.
void write_runner_cases(const std::filesystem::path& dir, Device device, uint32_t& seed,
                        const std::function<void(const std::string& entry, bool refused)>& add);

}  // namespace attnzoo::bench
