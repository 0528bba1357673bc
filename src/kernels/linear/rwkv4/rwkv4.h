#pragma once
// RWKV-4 WKV: a per-channel softmax-like average of past values with exponential decay and a bonus u for the
// current token, kept numerically stable by carrying a running maximum exponent p:
//
//   out_t = (e^{p - q} a + e^{u + k_t - q} v_t) / (e^{p - q} b + e^{u + k_t - q}),   q = max(p, u + k_t)
//   p' = max(p + w', k_t);  a' = e^{p + w' - p'} a + e^{k_t - p'} v_t;  b' = e^{p + w' - p'} b + e^{k_t - p'}
//
// with w' = -exp(w): w is the raw time_decay parameter, as in RWKV-4 checkpoints, transformers and fla.
// Layouts: w, u [C]; k, v, out [B, T, C]; state [Nseq, 3, C] f32 holding (a, b, p) = (num, den, max).
// Without an initial state a = b = 0 and p = -1e38 (as transformers). Packed sequences: cu_seqlens, B = 1.
// The recurrence is elementwise per channel, so there is no chunked form: the kernel runs channels in lanes.
#include <cstdint>

#include "core/tensor.h"

namespace attnzoo {

struct Rwkv4Args {
  TensorView w, u, k, v;
  TensorView initial_state;  // optional [Nseq, 3, C] f32
  TensorView final_state;    // optional [Nseq, 3, C] f32, written (may alias initial_state)
  TensorView out;            // [B, T, C]
  const int32_t* cu_seqlens = nullptr;
  int64_t cu_seqlens_len = 0;
};

void recurrent_rwkv4(const Rwkv4Args& args);
void rwkv4_reference(const Rwkv4Args& args);

}  // namespace attnzoo
