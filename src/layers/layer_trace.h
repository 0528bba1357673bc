#pragma once
// What one layer computed for a short prompt, for the explainer (`attnzoo explain -m DIR`, section 7): enough
// to redraw the layer's attention maps or show how much its recurrent state holds, without the runtime
// keeping any of it on the hot path. Filled by SequenceMixer::trace().
#include <cstdint>
#include <string>
#include <vector>

namespace attnzoo {

struct LayerTrace {
  std::string kind;  // the mixer's kind() ("attention", "sliding_attention", "linear_attention", ...)

  // Softmax attention: queries and keys exactly as the attention kernel saw them (after projection, q/k norm
  // and RoPE), [T, num_heads, head_dim] and [T, num_kv_heads, head_dim] row-major. Empty for other mixers.
  std::vector<float> q, k;
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  float scale = 0.f;    // logits = scale * q.k
  int64_t window = 0;   // >0: each query sees its last `window` keys (itself included)
  float softcap = 0.f;  // >0: logits = softcap * tanh(logits / softcap) before the mask
  std::vector<float> sinks;  // [num_heads] extra logit in each softmax denominator (gpt-oss); empty: none

  // Recurrent mixers: the Frobenius norm of each head's state after the prompt, [state_heads]. Empty for
  // softmax attention (its memory is the KV cache, which grows instead).
  std::vector<float> state_norms;
};

}  // namespace attnzoo
