#pragma once
// A validated MLA problem: where every sequence's queries, outputs and latent rows live, for padded, packed
// (cu_seqlens) and paged inputs alike. The naive path, the absorbed path and the reference all read memory
// through it, so any of them can run on any problem (the tests cross-check them that way).
#include <cstdint>
#include <vector>

#include "kernels/softmax/kv_quant.h"
#include "kernels/softmax/mla.h"

namespace attnzoo {

struct MlaDims {
  int64_t H = 0, dn = 0, dr = 0, dv = 0, r = 0;
  int64_t qk_dim() const { return dn + dr; }
  int64_t latent_dim() const { return r + dr; }
};

struct MlaSeq {
  int64_t q_offset = 0, o_offset = 0;  // elements to the sequence's first query / output token, head 0
  int64_t latent_offset = 0;           // contiguous latents: elements to key token 0
  const int32_t* blocks = nullptr;     // paged latents: this sequence's row of the block table
  int64_t Tq = 0, Tk = 0;
  int64_t cache_row = 0;               // a contiguous quantized cache: the sequence's batch row
};

struct MlaProblem {
  MlaDims dims;
  Device device{};  // where q, out, the weights and the latents live (a CUDA one only for mla_decode)
  float scale = 1.f;
  bool causal = true;
  std::vector<MlaSeq> seqs;
  const void* q = nullptr;
  void* o = nullptr;
  const void* latent = nullptr;
  const void* w = nullptr;  // kv_b_proj weight; row h * (dn + dv) + i starts at i-th row offset * w_row
  DType q_dtype = DType::f32, o_dtype = DType::f32, latent_dtype = DType::f32, w_dtype = DType::f32;
  int64_t q_token = 0, q_head = 0, o_token = 0, o_head = 0;
  int64_t latent_token = 0;                    // stride between a sequence's (or a block's) rows
  int64_t latent_block = 0, block_size = 0;    // caches: stride between blocks (batch rows), rows per block
  int64_t w_row = 0;
  // Decode problems keep the cache description for the decode kernel (nullptr for prefill problems).
  const int32_t* cache_seqlens = nullptr;
  const int32_t* block_table = nullptr;
  int64_t max_blocks_per_seq = 0;
  KvScaleView latent_scale;  // int8 / fp8 latent caches

  // Element offset of key token j of sequence s in `latent`.
  int64_t latent_row(const MlaSeq& s, int64_t j) const {
    if (s.blocks) return int64_t(s.blocks[j / block_size]) * latent_block + (j % block_size) * latent_token;
    return s.latent_offset + j * latent_token;
  }
  // Latent row j of sequence s as f32 (dequantized for a quantized cache).
  void load_latent_row(const MlaSeq& s, int64_t j, float* dst) const;
  // Offset of W_UK_h (row 0 of head h) and W_UV_h in `w`.
  int64_t w_uk(int64_t h) const { return h * (dims.dn + dims.dv) * w_row; }
  int64_t w_uv(int64_t h) const { return (h * (dims.dn + dims.dv) + dims.dn) * w_row; }
  int64_t total_q() const;
  int64_t total_k() const;
};

MlaProblem make_mla_prefill_problem(const TensorView& q, const TensorView& latent, const MlaWeights& weights,
                                    const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen);
// Queries against a latent cache (contiguous or paged): q padded [B, Tq, H, dq], or packed [total_q, H, dq]
// with varlen.cu_seqlens_q; cache_seqlens[b] counts sequence b's rows including its queries' own. With
// any_device the tensors may live on any one device (mla_decode's GPU branch); cache_seqlens and block_table
// stay host memory on every device. Otherwise a device tensor is refused by name.
MlaProblem make_mla_cache_problem(const TensorView& q, const LatentCacheView& cache, const MlaWeights& weights,
                                  const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen,
                                  bool any_device = false);

// The two fast paths and the definition, on a validated problem.
void mla_run_naive(const MlaProblem& p);
void mla_run_absorbed(const MlaProblem& p);
void mla_run_reference(const MlaProblem& p);

}  // namespace attnzoo
