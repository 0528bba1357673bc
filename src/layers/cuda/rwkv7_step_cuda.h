#pragma once
// RWKV-7's per-token pieces on an NVIDIA GPU, the GPU runner's twins of the CPU layers' loops
// (layers/rwkv7_time_mix.cc, rwkv7_channel_mix.cc, rwkv7_state.cc, layer_norm.cc): the LayerNorm with bias (and
// per head: the time mix's group norm), the token shift with all of a sublayer's lerps in one pass, the
// activations between the LoRAs' GEMMs, the key preparation before the recurrence and the output before o_proj.
// f32 math; the lerps and the output are written bf16 (the projections' input). No CUDA headers here.
#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"

namespace attnzoo {

// y = layer_norm(x) * weight + bias over rows of dim; x, y f32 [rows, dim] contiguous (y may be x), weight f32
// [dim], bias f32 [dim] or none (null data); eps finite and >= 0.
void check_rwkv7_layer_norm_cuda(const TensorView& x, const TensorView& weight, const TensorView& bias,
                                 const TensorView& y, float eps);

// The token shift of the packed batch and its M lerps: out[m][t] = x[t] + (prev(t) - x[t]) * mixes[m], prev(t)
// the token before t in its sequence or, for a sequence's first token, its shift row, which then becomes the
// sequence's last token. x f32 [T, C] contiguous; mixes f32 [M, C] contiguous; out bf16 [M, T, C] contiguous.
// Sequence s's shift row: C floats at shift + slot * shift_stride, slot = slots[s] (a device int32 [S]: the pool's
// state slots, not bounded by the kernel; negative: a pad, whose shift row counts as zeros and is not written) or
// s where slots is null. seq_of int32 [T] and cu_seqlens int32 [S + 1] on the device, the caller's (the runner's
// step upload), not checked against each other here.
// With norm_weight, the block's LayerNorm comes first in the same launch (the runner's attn_norm / ffn_norm): the
// shift and the lerps are of h = layer_norm(x) * norm_weight + norm_bias (f32 [C]; the bias optional) with eps,
// the shift rows receive h, and h itself is never stored.
struct Rwkv7TokenShift {
  TensorView x, mixes, out;
  TensorView norm_weight, norm_bias;
  float eps = 0.f;
  float* shift = nullptr;
  int64_t shift_stride = 0;
  const int32_t* slots = nullptr;
  const int32_t* seq_of = nullptr;
  const int32_t* cu_seqlens = nullptr;
};
void check_rwkv7_shift_mix_cuda(const Rwkv7TokenShift& s);

// The activations between the blocks' GEMMs: the LoRAs' middles (tanh for w, sigmoid for g), the decay
// -exp(-1/2) * sigmoid(.) after w's LoRA, the channel mix's relu(.)^2, none (a rounding to y's dtype).
enum class Rwkv7Activation : int { none, tanh, sigmoid, decay, relu2 };
// x f32 contiguous; y f32 (may be x) or bf16 contiguous, as many values.
void check_rwkv7_activate_cuda(const TensorView& x, const TensorView& y);

// The time mix between its projections and the recurrence, per (token, head): a = sigmoid(a),
// kn = l2norm(k * k_k), k <- k * (1 + (a - 1) * k_a), a_rec = -kn, a <- kn * a (the recurrence's b); then
// v <- lerp(v, v_first, sigmoid(v_gate)) where v_gate is given, else v_first = v (the first layer); and where w is
// given, the decay after w's LoRA in place: w <- -exp(-1/2) sigmoid(w) (one launch fewer than activating it apart).
// k, a, a_rec (and w) f32 [T, H * K]; k_k, k_a f32 [H * K]; v, v_first (and v_gate) f32 [T, H * V]; all contiguous.
struct Rwkv7Keys {
  TensorView k, a, a_rec, k_k, k_a, v, v_first, v_gate, w;
  int64_t heads = 0;
  bool fused_l2norm = true;
};
void check_rwkv7_prepare_keys_cuda(const Rwkv7Keys& p);

// out = (group_norm(o) + sum_K(r * k * r_k) * v) * g per (token, head), the group norm's weight and bias f32
// [H * V] with `eps`. o, v, g f32 [T, H * V]; r, k f32 [T, H * K]; r_k f32 [H * K]; out bf16 [T, H * V].
struct Rwkv7Output {
  TensorView o, norm_weight, norm_bias, r, k, r_k, v, g, out;
  int64_t heads = 0;
  float eps = 0.f;
};
void check_rwkv7_output_cuda(const Rwkv7Output& p);

// The launchers (rwkv7_step.cu, CUDA builds only) check first, then run on the tensors' device. ArgumentError /
// DTypeError naming the argument.
void rwkv7_layer_norm_cuda(const TensorView& x, const TensorView& weight, const TensorView& bias, const TensorView& y,
                           float eps, Stream stream = current_stream());
void rwkv7_shift_mix_cuda(const Rwkv7TokenShift& s, Stream stream = current_stream());
void rwkv7_activate_cuda(Rwkv7Activation act, const TensorView& x, const TensorView& y,
                         Stream stream = current_stream());
// Two activations in one launch (the w and g LoRAs' middles), each pair checked as rwkv7_activate_cuda's, y1 of
// y0's dtype and device.
void rwkv7_activate_pair_cuda(Rwkv7Activation act0, const TensorView& x0, const TensorView& y0, Rwkv7Activation act1,
                              const TensorView& x1, const TensorView& y1, Stream stream = current_stream());
void rwkv7_prepare_keys_cuda(const Rwkv7Keys& p, Stream stream = current_stream());
void rwkv7_output_cuda(const Rwkv7Output& p, Stream stream = current_stream());

}  // namespace attnzoo
