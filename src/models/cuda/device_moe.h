#pragma once
// Mixture-of-experts feed-forwards as GPU blocks (device_blocks.h): the router's projection and top-k routing on the
// device (softmax then top-k for SparseMoe: Qwen3-MoE, Mixtral, Qwen2-MoE / Qwen3-Next's sigmoid-gated shared
// expert; DeepSeek's grouped routing with its correction bias and routed scaling for DeepseekMoe, over gated experts
// or Nemotron-H's ungated relu² ones; gpt-oss's GptOssMoe: its biased router, top-k then softmax, the experts'
// biases added after each grouped GEMM and its clamped SwiGLU, layers/cuda/gpt_oss_moe_cuda.h), the routed
// entries grouped by expert, gate | up and down as two grouped GEMMs over every expert's weights uploaded as one
// [E, 2I, H] and one [E, H, I] array, and the combine into the residual stream after the shared expert's output,
// in the CPU's order (layers/cuda/moe_cuda.h). No host round trip: a step's expert loads stay on the device.
#include <memory>

#include "layers/deepseek_moe.h"
#include "layers/gpt_oss_moe.h"
#include "layers/moe.h"
#include "models/cuda/device_blocks.h"

namespace attnzoo {

std::unique_ptr<DeviceFfn> make_device_sparse_moe(const SparseMoe& moe, const DeviceLoad& load);
// GatedMlp experts (DeepSeek-V3 / V2, GLM-4.5, MiniMax-M2, LFM2-MoE) or PlainMlp ones (Nemotron-H), instantiated
// for both in device_moe.cc.
template <class Expert>
std::unique_ptr<DeviceFfn> make_device_deepseek_moe(const BasicDeepseekMoe<Expert>& moe, const DeviceLoad& load);
std::unique_ptr<DeviceFfn> make_device_gpt_oss_moe(const GptOssMoe& moe, const DeviceLoad& load);

}  // namespace attnzoo
