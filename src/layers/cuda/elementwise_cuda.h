#pragma once
// The element-wise pieces of a step on an NVIDIA GPU: the gated activation of an MLP (the twin of
// layers/activations.h's gated_activation), the residual add, the product and the sigmoid gate. f32 math on f32 / bf16 / f16 data, 16-byte
// vectors where every row allows them.
#include "core/device.h"
#include "core/tensor.h"
#include "layers/activations.h"

namespace attnzoo {

// out = act(gate) * up, each [rows, n] (rows.h: any row strides, so gate and up may be the two halves of one
// [T, 2I] gate_up row, vLLM's silu_and_mul layout, or two separate projections as GatedMlp has them); one dtype
// for the three; out may be gate or up. ArgumentError / DTypeError naming the argument.
void check_gated_activation_cuda(const TensorView& gate, const TensorView& up, const TensorView& out);
// y = a + b, one shape and one dtype; y may be a or b.
void check_add_cuda(const TensorView& a, const TensorView& b, const TensorView& y);

// The launchers (elementwise.cu, CUDA builds only) check first, then run on the tensors' device.
void gated_activation_cuda(Activation act, const TensorView& gate, const TensorView& up, const TensorView& out,
                           Stream stream = current_stream());
void add_cuda(const TensorView& a, const TensorView& b, const TensorView& y, Stream stream = current_stream());
// y = a * b (LFM2's short-conv gates), as add_cuda: one shape and dtype (rows.h: any row strides), checked by
// check_add_cuda; y may be a or b.
void mul_cuda(const TensorView& a, const TensorView& b, const TensorView& y, Stream stream = current_stream());
// y = a * sigmoid(gate) (the attention output gate of Qwen3-Next / Qwen3.5, AttentionLayer's formula), as mul_cuda.
void sigmoid_gate_cuda(const TensorView& a, const TensorView& gate, const TensorView& y,
                       Stream stream = current_stream());

}  // namespace attnzoo
