#pragma once
// Options shared by every softmax-attention kernel (prefill, decode, MLA) and their references.
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/softmax/block_mask.h"

namespace attnzoo {

// Head dims up to this are accepted (MLA's absorbed decode attends over kv_lora_rank + rope = 576).
constexpr int64_t kMaxHeadDim = 1024;

struct AttentionOptions {
  float scale = std::numeric_limits<float>::quiet_NaN();  // NaN: head_dim^-0.5 (front ends reject a NaN argument)
  bool causal = true;
  int64_t window = 0;                   // >0: key j visible from query i iff j > i - window (and j <= i if causal)
  float softcap = 0.f;                  // >0: s = softcap * tanh(s / softcap) (Gemma 2), before bias and mask
  const float* sinks = nullptr;         // [Hq]: one learned logit per head joins the softmax, then is dropped
  const float* alibi_slopes = nullptr;  // [Hq]: s -= slope * |pos_q - pos_k|
  const BlockMask* block_mask = nullptr;  // tiles outside the pattern are skipped whole
};

// Where a query and a key sit inside their sequence. Queries are bottom-right aligned: with Tq queries and
// Tk keys, query i has position Tk - Tq + i (flash-attn >= 2.1, and what decode with a cache means).
struct MaskGeometry {
  bool causal;
  int64_t window;
  const BlockMask* block_mask;

  bool visible(int64_t qpos, int64_t kpos) const {
    if (causal && kpos > qpos) return false;
    if (window > 0 && kpos <= qpos - window) return false;
    if (block_mask && !block_mask->allows(qpos, kpos)) return false;
    return true;
  }
};

inline MaskGeometry mask_geometry(const AttentionOptions& o) { return {o.causal, o.window, o.block_mask}; }

// The post-scale score transform every path applies in the same order: softcap, then ALiBi bias.
inline float transform_score(float s, float softcap, float alibi_slope, int64_t qpos, int64_t kpos) {
  if (softcap > 0.f) s = softcap * std::tanh(s / softcap);
  if (alibi_slope != 0.f) s -= alibi_slope * float(qpos > kpos ? qpos - kpos : kpos - qpos);
  return s;
}

}  // namespace attnzoo
