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

}  // namespace attnzoo
