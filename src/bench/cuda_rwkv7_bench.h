#pragma once
// The RWKV-7 GPU runner's per-token kernels (layers/cuda/rwkv7_step_cuda.h) in `attnzoo bench kernels --device
// cuda`, each through the launcher the runner calls, at RWKV-7 2.9B's widths (C 2560, H 40, K = V 64, the channel
// mix 4 C) over a 4096-token prefill of 8 sequences, bandwidth rows (bytes read + written per second):
//   rwkv7_shift_mix      the time mix's token shift and its six lerps (x, the shift rows read; six bf16 inputs
//                        and the shift rows written), and the channel mix's one lerp
//   rwkv7_decay          w's LoRA output to the log decay -exp(-1/2) sigmoid(.), f32 in place
//   rwkv7_relu2          the channel mix's relu(.)^2, f32 in, bf16 out (the value projection's input)
//   rwkv7_prepare_keys   kk = l2norm(k k_k), k's update, the recurrence's a and b, v's lerp towards v_first
//   rwkv7_output         the gated group norm and bonus: (group_norm(o) + sum_K(r k r_k) v) g, bf16 out
// On the CPU (make test) the same rows run the CPU time / channel mix's own code (rwkv7_token_shift, layer_norm,
// rwkv7_prepare_keys, rwkv7_bonus_gate and their loops) on the same arguments.
#include <cstdint>
#include <functional>
#include <vector>

#include "bench/bandwidth_tables.h"
#include "layers/batch.h"
#include "layers/cuda/rwkv7_step_cuda.h"

namespace attnzoo::bench {

// dims T and C (shift_mix: M lerps, S sequences; prepare_keys / output: H, K, V; decay / relu2: width).
std::vector<LinearCase> rwkv7_step_cases(Scale s);
double rwkv7_step_bytes(const LinearCase& c);
// The kernels' CPU twins on host memory, as the rows and `--write-cases` run them: the CPU time / channel mix's
// code with the kernels' arguments (rwkv7_step_cuda.h); bf16 outputs as raw bits.
// out[m] = x + (prev - x) * mixes[m] over the batch's tokens; shift_of(s) the sequence's shift row (advanced).
void rwkv7_shift_mix_host(const float* x, const Batch& batch, int64_t C, const float* mixes, int64_t M,
                          const std::function<float*(int64_t)>& shift_of, uint16_t* out);
// y = act(x) over n values, y f32 (may be x) or bf16.
void rwkv7_activate_host(Rwkv7Activation act, const float* x, int64_t n, void* y, DType y_dtype);
// a = sigmoid(a), then rwkv7_prepare_keys; v lerps towards v_first by sigmoid(v_gate), or without v_gate
// v_first = v (the first layer).
void rwkv7_prepare_keys_host(float* k, float* a, float* a_rec, const float* k_k, const float* k_a, float* v,
                             float* v_first, const float* v_gate, int64_t T, int64_t H, int64_t K, int64_t V,
                             bool fused_l2norm);
// out (bf16) = (group_norm(o) + sum_K(r k r_k) v) g.
void rwkv7_output_host(const float* o, const float* norm_weight, const float* norm_bias, const float* r,
                       const float* k, const float* r_k, const float* v, const float* g, int64_t T, int64_t H,
                       int64_t K, int64_t V, float eps, uint16_t* out);

// The table (key rwkv7_step).
BandwidthTable rwkv7_step_table();

}  // namespace attnzoo::bench
