#include "models/cuda/mla_step_views.h"

namespace attnzoo {
namespace {

TensorView on(Device device, void* data, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView t = TensorView::contiguous(data, dtype, shape);
  t.device = device;
  return t;
}

// [rows, heads, dim] with rows `row_stride` and heads `head_stride` elements apart.
TensorView strided(Device device, void* data, DType dtype, int64_t rows, int64_t heads, int64_t dim,
                   int64_t row_stride, int64_t head_stride) {
  TensorView t = on(device, data, dtype, {rows, heads, dim});
  t.strides[0] = row_stride;
  t.strides[1] = head_stride;
  return t;
}

}  // namespace

MlaStepViews mla_step_views(const MlaConfig& c, Device device, DType dtype, int64_t T, void* q, void* latent,
                            void* out) {
  const int64_t H = c.num_heads, Dq = c.qk_head_dim(), L = c.latent_dim(), r = c.kv_lora_rank;
  const size_t e = dtype_size(dtype);
  auto* q_bytes = static_cast<uint8_t*>(q);
  auto* latent_bytes = static_cast<uint8_t*>(latent);
  MlaStepViews v;
  v.q = on(device, q, dtype, {T, H * Dq});
  v.q_heads = on(device, q, dtype, {T, 1, H, Dq});
  v.q_pe = strided(device, q_bytes + size_t(c.qk_nope_head_dim) * e, dtype, T, H, c.qk_rope_head_dim, H * Dq, Dq);
  v.latent = on(device, latent, dtype, {T, L});
  v.latent_rows = on(device, latent, dtype, {T, 1, L});
  v.c_kv = strided(device, latent, dtype, T, 1, r, L, L);
  v.k_pe = strided(device, latent_bytes + size_t(r) * e, dtype, T, 1, c.qk_rope_head_dim, L, L);
  v.out_heads = on(device, out, dtype, {T, 1, H, c.v_head_dim});
  v.out = on(device, out, dtype, {T, H * c.v_head_dim});
  return v;
}

}  // namespace attnzoo
