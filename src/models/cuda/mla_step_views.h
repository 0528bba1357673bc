#pragma once
// The tensors device_mla.h's launches take, laid over one step's scratch: plain C++, so make test can hand them
// to every launcher's host-side checks (check_rope_cuda, check_rms_norm_cuda, check_paged_rows_cuda,
// check_cuda_mla_decode) at real model shapes without a GPU. q_pe, c_kv and k_pe are strided slices: RoPE and the
// kv_a norm run in place inside the projections' rows.
#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"
#include "layers/mla_mixer.h"

namespace attnzoo {

struct MlaStepViews {
  TensorView q;            // [T, H * (dn + dr)]: q_proj's or q_b_proj's output
  TensorView q_heads;      // [T, 1, H, dn + dr]: one decode row per token
  TensorView q_pe;         // [T, H, dr] inside each head of q
  TensorView latent;       // [T, r + dr]: kv_a_proj_with_mqa's output
  TensorView latent_rows;  // [T, 1, r + dr]: the rows written into the pool
  TensorView c_kv;         // [T, 1, r] inside the latent rows (kv_a_layernorm)
  TensorView k_pe;         // [T, 1, dr] inside the latent rows
  TensorView out_heads;    // [T, 1, H, dv]: the attention's output
  TensorView out;          // [T, H * dv]: o_proj's input
};

// q, latent and out: scratch of T * H * (dn + dr), T * (r + dr) and T * H * dv elements of `dtype` on `device`.
MlaStepViews mla_step_views(const MlaConfig& c, Device device, DType dtype, int64_t T, void* q, void* latent,
                            void* out);

// One expanded prefill call's tensors (mla_rows_plan.h: N keys, n queries, head dim D) over heads
// [h0, h0 + heads), in launch order. The latent rows' views are the same for every slice of heads.
struct MlaExpandViews {
  TensorView pool_rows;    // [num_blocks * block_size, 1, L]: the latent cache's slots as rows
  TensorView keys_latent;  // [N, 1, L]: the keys' latent rows gathered
  TensorView c_kv;         // [N, r] inside them: the expansion GEMM's x
  TensorView w;            // [heads * (dn + dv), r]: the slice's rows of kv_b_proj, its W
  TensorView kv;           // [N, heads * (dn + dv)]: its y
  TensorView kv_nope, kv_v;        // [N, heads, dn], [N, heads, dv]: the heads of kv
  TensorView k_pe;                 // [N, 1, dr] inside the gathered latent rows, one head for all
  TensorView k, k_nope, k_rope;    // [N, heads, D]; its first dn columns; the rest (k_pe, then zeros)
  TensorView v;                    // [N, heads, D]
  TensorView step_q;               // [T, heads, dn + dr]: the slice's heads of the step's queries
  TensorView q, o;                 // [n, heads, D]: the gathered, padded queries; the prefill's output
  TensorView o_v;                  // [n, heads, dv]: o's first dv columns
  TensorView step_out;             // [T, heads, dv]: the slice's heads of the step's attention output
};

// The three scratch buffers of one call over `heads` heads, in bytes: latent rows and expansion, padded K and V,
// padded Q and output (each part 256-byte aligned inside its buffer).
struct MlaExpandBytes {
  size_t latent_kv = 0, k_v = 0, q_o = 0;
};
MlaExpandBytes mla_expand_bytes(const MlaConfig& c, DType dtype, int64_t D, int64_t N, int64_t n, int64_t heads);

// `latent_cache` the pool's [num_blocks, block_size, 1, L] (ArgumentError unless its slots are evenly spaced);
// `step` the step's views; `w_kv_b` kv_b_proj [H * (dn + dv), r]; the buffers of mla_expand_bytes' sizes.
MlaExpandViews mla_expand_views(const MlaConfig& c, const TensorView& latent_cache, const MlaStepViews& step,
                                const TensorView& w_kv_b, int64_t D, int64_t N, int64_t n, int64_t h0,
                                int64_t heads, void* latent_kv, void* k_v, void* q_o);

}  // namespace attnzoo
