#include "layers/cuda/rope_launch.h"

#include "core/dtype.h"

namespace attnzoo::cuda_step {
namespace {

HeadsMap heads_map(const TensorView& t) {
  if (t.empty()) return {};
  return {t.shape[1], t.strides[0], t.strides[1]};
}

// 16-byte accesses need every head start and every unit 16-byte aligned.
bool heads_vectorizable(const TensorView& t, const HeadsMap& m, int64_t unit_stride_elems, size_t elem_bytes) {
  if (t.empty()) return true;
  const int64_t vec = int64_t(16 / elem_bytes);
  return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && m.token_stride % vec == 0 &&
         (m.heads <= 1 || m.head_stride % vec == 0) && unit_stride_elems % vec == 0;
}

}  // namespace

RopeLaunch plan_rope(const Rope& rope, const TensorView& q, const TensorView& k) {
  RopeLaunch l;
  const int64_t rotary_dim = rope.rotary_dim();
  l.q_map = heads_map(q);
  l.k_map = heads_map(k);
  l.half = int(rotary_dim / 2);
  l.scale = rope.attention_scale();
  l.interleaved = rope.config().layout == RopeLayout::interleaved;
  // Half layout: a unit's two accesses start at i0 and half + i0, so half must be whole vectors; interleaved:
  // units tile [0, rotary_dim).
  const int64_t unit_stride = l.interleaved ? rotary_dim : rotary_dim / 2;
  const size_t elem = dtype_size(q.dtype);
  l.vectorized = heads_vectorizable(q, l.q_map, unit_stride, elem) && heads_vectorizable(k, l.k_map, unit_stride, elem);
  l.smem_bytes = size_t(2 * l.half) * sizeof(float);
  return l;
}

}  // namespace attnzoo::cuda_step
