#pragma once
// What gpt-oss's experts add to the MoE dispatch (moe_cuda.h) on an NVIDIA GPU, twins of layers/gpt_oss_moe.h:
//
//   grouped_bias_cuda    y [n, N] += bias[e] on each grouped row of expert e (the rows [offsets[e], offsets[e + 1])
//                        of moe_group_cuda's order), the biases the grouped GEMMs do not add; without offsets every
//                        row takes bias row 0 (a router's bias over its f32 logits)
//   gpt_oss_swiglu_cuda  out = (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha * g), g = min(gate, limit), the
//                        clamped SwiGLU of gpt_oss_clamped_swiglu (same f32 operations in the same order)
//
// f32 rows with a contiguous last dimension and any row stride (gate and up may be the two halves of one [n, 2I]
// grouped GEMM output). No CUDA headers here.
#include "core/device.h"
#include "core/tensor.h"

namespace attnzoo {

// Every refusal, before any CUDA call. ArgumentError / DTypeError naming the argument: y f32 [n, N]; bias f32
// [E, N] contiguous (E = 1 without offsets); offsets int32 [E + 1] contiguous or null, E at most kMaxExpertsCuda.
void check_grouped_bias_cuda(const TensorView& y, const TensorView& bias, const TensorView* offsets);
// gate, up and out f32 [n, I] of one shape on one device (out may be gate or up); alpha finite, limit finite and
// positive (GptOssMoe refuses the rest at load).
void check_gpt_oss_swiglu_cuda(const TensorView& gate, const TensorView& up, float alpha, float limit,
                               const TensorView& out);

// The launchers (gpt_oss_moe.cu, CUDA builds only) check first, then run on the tensors' device and `stream`.
void grouped_bias_cuda(const TensorView& y, const TensorView& bias, const TensorView* offsets,
                       Stream stream = current_stream());
void gpt_oss_swiglu_cuda(const TensorView& gate, const TensorView& up, float alpha, float limit,
                         const TensorView& out, Stream stream = current_stream());

}  // namespace attnzoo
