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
#include <vector>

#include "bench/bandwidth_tables.h"

namespace attnzoo::bench {

// dims T and C (shift_mix: M lerps, S sequences; prepare_keys / output: H, K, V; decay / relu2: width).
std::vector<LinearCase> rwkv7_step_cases(Scale s);
double rwkv7_step_bytes(const LinearCase& c);
// The table (key rwkv7_step).
BandwidthTable rwkv7_step_table();

}  // namespace attnzoo::bench
