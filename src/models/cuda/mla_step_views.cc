#include "models/cuda/mla_step_views.h"

#include "core/error.h"

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

// t's heads from column `col`, `cols` wide.
TensorView columns(TensorView t, int64_t col, int64_t cols) {
  t.data = static_cast<uint8_t*>(t.data) + size_t(col) * dtype_size(t.dtype);
  t.shape[2] = cols;
  return t;
}

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

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

MlaExpandBytes mla_expand_bytes(const MlaConfig& c, DType dtype, int64_t D, int64_t N, int64_t n, int64_t heads) {
  const size_t e = dtype_size(dtype);
  MlaExpandBytes b;
  b.latent_kv =
      align256(size_t(N * c.latent_dim()) * e) + size_t(N * heads * (c.qk_nope_head_dim + c.v_head_dim)) * e;
  b.k_v = 2 * align256(size_t(N * heads * D) * e);
  b.q_o = 2 * align256(size_t(n * heads * D) * e);
  return b;
}

MlaExpandViews mla_expand_views(const MlaConfig& c, const TensorView& latent_cache, const MlaStepViews& step,
                                const TensorView& w_kv_b, int64_t D, int64_t N, int64_t n, int64_t h0,
                                int64_t heads, void* latent_kv, void* k_v, void* q_o) {
  const int64_t H = c.num_heads, L = c.latent_dim(), r = c.kv_lora_rank, dn = c.qk_nope_head_dim;
  const int64_t dv = c.v_head_dim, Dq = c.qk_head_dim(), T = step.q.size(0);
  require(h0 >= 0 && heads > 0 && h0 + heads <= H, "heads", "must be a slice of the layer's heads");
  require(w_kv_b.ndim == 2 && w_kv_b.size(0) == H * (dn + dv) && w_kv_b.size(1) == r && w_kv_b.is_contiguous(),
          "w_kv_b", "must be a contiguous [num_heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank]");
  const DType a = step.q.dtype;
  const Device device = step.q.device;
  const size_t e = dtype_size(a);
  auto* lk = static_cast<uint8_t*>(latent_kv);
  auto* kvp = static_cast<uint8_t*>(k_v);
  auto* qo = static_cast<uint8_t*>(q_o);
  const size_t kv_at = align256(size_t(N * L) * e), v_at = align256(size_t(N * heads * D) * e);
  const size_t o_at = align256(size_t(n * heads * D) * e);
  MlaExpandViews x;
  const TensorView& pool = latent_cache;
  require(pool.ndim == 4 && pool.size(2) == 1 && pool.size(3) == L && pool.stride(3) == 1, "latent_cache",
          "must be [num_blocks, block_size, 1, r + dr]");
  require(pool.stride(0) == pool.size(1) * pool.stride(1), "latent_cache", "needs its blocks' slots evenly spaced");
  x.pool_rows = strided(pool.device, pool.data, pool.dtype, pool.size(0) * pool.size(1), 1, L, pool.stride(1), L);
  x.keys_latent = on(device, lk, a, {N, 1, L});
  x.c_kv = on(device, lk, a, {N, r});
  x.c_kv.strides[0] = L;
  x.w = on(w_kv_b.device, static_cast<uint8_t*>(w_kv_b.data) + size_t(h0 * (dn + dv) * r) * dtype_size(w_kv_b.dtype),
           w_kv_b.dtype, {heads * (dn + dv), r});
  x.kv = on(device, lk + kv_at, a, {N, heads * (dn + dv)});
  const TensorView kv_heads = on(device, lk + kv_at, a, {N, heads, dn + dv});
  x.kv_nope = columns(kv_heads, 0, dn);
  x.kv_v = columns(kv_heads, dn, dv);
  x.k_pe = strided(device, lk + size_t(r) * e, a, N, 1, c.qk_rope_head_dim, L, L);
  x.k = on(device, kvp, a, {N, heads, D});
  x.k_nope = columns(x.k, 0, dn);
  x.k_rope = columns(x.k, dn, D - dn);
  x.v = on(device, kvp + v_at, a, {N, heads, D});
  x.step_q = strided(device, static_cast<uint8_t*>(step.q.data) + size_t(h0 * Dq) * e, a, T, heads, Dq, H * Dq, Dq);
  x.q = on(device, qo, a, {n, heads, D});
  x.o = on(device, qo + o_at, a, {n, heads, D});
  x.o_v = columns(x.o, 0, dv);
  x.step_out = strided(device, static_cast<uint8_t*>(step.out.data) + size_t(h0 * dv) * e, a, T, heads, dv, H * dv, dv);
  return x;
}

}  // namespace attnzoo
