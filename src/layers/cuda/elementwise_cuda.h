#pragma once
// The element-wise pieces of a step on an NVIDIA GPU: the gated activation of an MLP (the twin of
// layers/activations.h's gated_activation), the residual add (scaled: Granite's residual multiplier), the product
// and the sigmoid gate, the output head's logits multiplier and softcap (DecoderModel's CPU forward), and Llama 4's
// query temperature (AttentionLayer::scale_queries). f32 math on f32 / bf16 / f16 data, 16-byte
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
// y = a + alpha * b, as add_cuda; alpha finite.
void check_add_scaled_cuda(const TensorView& a, const TensorView& b, float alpha, const TensorView& y);
// y = x * scale, then cap * tanh(y / cap) when cap > 0; x and y of one shape and dtype (y may be x), or an f32 x
// and a bf16 / f16 y (the residual stream rounded for the projections where a block has no norm); scale finite,
// cap finite and >= 0.
void check_scale_softcap_cuda(const TensorView& x, const TensorView& y, float scale, float cap);
// q [tokens, n] rows (n: heads * head_dim) scaled in place, row t by 1 + beta * log(1 + floor(positions[t] /
// interval)); positions int32 [tokens] contiguous on q's device; beta finite, interval > 0.
void check_query_temperature_cuda(const TensorView& q, const TensorView& positions, float beta, int64_t interval);

// The launchers (elementwise.cu, CUDA builds only) check first, then run on the tensors' device.
void gated_activation_cuda(Activation act, const TensorView& gate, const TensorView& up, const TensorView& out,
                           Stream stream = current_stream());
void add_cuda(const TensorView& a, const TensorView& b, const TensorView& y, Stream stream = current_stream());
void add_scaled_cuda(const TensorView& a, const TensorView& b, float alpha, const TensorView& y,
                     Stream stream = current_stream());
void scale_softcap_cuda(const TensorView& x, const TensorView& y, float scale, float cap,
                        Stream stream = current_stream());
void query_temperature_cuda(const TensorView& q, const TensorView& positions, float beta, int64_t interval,
                            Stream stream = current_stream());
// y = a * b (LFM2's short-conv gates), as add_cuda: one shape and dtype (rows.h: any row strides), checked by
// check_add_cuda; y may be a or b.
void mul_cuda(const TensorView& a, const TensorView& b, const TensorView& y, Stream stream = current_stream());
// y = a * sigmoid(gate) (the attention output gate of Qwen3-Next / Qwen3.5, AttentionLayer's formula), as mul_cuda.
void sigmoid_gate_cuda(const TensorView& a, const TensorView& gate, const TensorView& y,
                       Stream stream = current_stream());

}  // namespace attnzoo
