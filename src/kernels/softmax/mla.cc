// MLA's two fast paths, both built from the weight GEMM (mla_matmul) and the tiled softmax kernel (prefill.cc):
// the naive form expands the latent into per-head K/V and runs multi-head attention; the absorbed form folds
// W_UK into the queries, runs multi-query attention straight on the latent rows, and applies W_UV afterwards.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/threads.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/decode_problem.h"
#include "kernels/softmax/mla_matmul.h"
#include "kernels/softmax/mla_problem.h"

namespace attnzoo {
namespace {

// Expanded K/V for a block of heads stays under this many bytes (long prompts with 128 heads would otherwise
// need gigabytes); attention over one head block already has sequences x heads x query blocks tasks.
constexpr int64_t kExpandBudgetBytes = int64_t(64) << 20;

const void* offset_bytes(const void* base, DType t, int64_t elements) {
  return static_cast<const char*>(base) + elements * int64_t(dtype_size(t));
}

// Largest divisor of H not above `limit` (at least 1).
int64_t divisor_at_most(int64_t H, int64_t limit) {
  for (int64_t c = std::clamp<int64_t>(limit, 1, H); c > 1; --c)
    if (H % c == 0) return c;
  return 1;
}

// Every sequence's latent rows as f32 [total_k, r + dr], sequences back to back (row start in `first`).
void gather_latent_f32(const MlaProblem& p, const std::vector<int64_t>& first, float* dst) {
  const int64_t L = p.dims.latent_dim();
  ThreadPool::global().parallel_for(int64_t(p.seqs.size()), [&](int64_t s, int) {
    const MlaSeq& seq = p.seqs[size_t(s)];
    for (int64_t j = 0; j < seq.Tk; ++j) p.load_latent_row(seq, j, dst + (first[size_t(s)] + j) * L);
  });
}

std::vector<int64_t> key_starts(const MlaProblem& p) {
  std::vector<int64_t> first(p.seqs.size());
  int64_t n = 0;
  for (size_t s = 0; s < p.seqs.size(); ++s) {
    first[s] = n;
    n += p.seqs[s].Tk;
  }
  return first;
}

AttentionProblem base_attention_problem(const MlaProblem& p) {
  AttentionProblem a;
  a.opts.causal = p.causal;
  a.opts.scale = p.scale;
  a.scale = p.scale;
  return a;
}

}  // namespace

void mla_run_naive(const MlaProblem& p) {
  const MlaDims& d = p.dims;
  if (p.total_q() == 0) return;
  const int64_t Mk = p.total_k(), L = d.latent_dim(), Dk = d.qk_dim();
  const std::vector<int64_t> first = key_starts(p);
  AlignedBuffer<float> latent(size_t(Mk * L));
  gather_latent_f32(p, first, latent.data());

  const int64_t per_head_bytes = Mk * (Dk + d.dv) * 4;
  const int64_t Hc = divisor_at_most(d.H, kExpandBudgetBytes / std::max<int64_t>(per_head_bytes, 1));
  AlignedBuffer<float> keys(size_t(Mk * Hc * Dk)), values(size_t(Mk * Hc * d.dv));
  for (int64_t h0 = 0; h0 < d.H; h0 += Hc) {
    // keys[:, h, :dn] = c_kv W_UK_h^T and values[:, h, :] = c_kv W_UV_h^T, reading W's rows as B's columns.
    WeightMatmul mm;
    mm.batch = Hc;
    mm.M = Mk;
    mm.K = d.r;
    mm.a = latent.data();
    mm.lda = L;
    mm.a_batch = 0;
    mm.w_dtype = p.w_dtype;
    mm.w_k_stride = 1;
    mm.w_n_stride = p.w_row;
    mm.w_batch = (d.dn + d.dv) * p.w_row;
    mm.N = d.dn;
    mm.w = offset_bytes(p.w, p.w_dtype, p.w_uk(h0));
    mm.c = keys.data();
    mm.ldc = Hc * Dk;
    mm.c_batch = Dk;
    weight_matmul(mm);
    mm.N = d.dv;
    mm.w = offset_bytes(p.w, p.w_dtype, p.w_uv(h0));
    mm.c = values.data();
    mm.ldc = Hc * d.dv;
    mm.c_batch = d.dv;
    weight_matmul(mm);
    for (int64_t m = 0; m < Mk; ++m)  // k_pe is shared by every head
      for (int64_t h = 0; h < Hc; ++h)
        std::memcpy(keys.data() + (m * Hc + h) * Dk + d.dn, latent.data() + m * L + d.r, size_t(d.dr) * 4);

    AttentionProblem a = base_attention_problem(p);
    a.Hq = a.Hkv = Hc;
    a.D = Dk;
    a.Dv = d.dv;
    a.q = offset_bytes(p.q, p.q_dtype, h0 * p.q_head);
    a.k = keys.data();
    a.v = values.data();
    a.o = static_cast<char*>(p.o) + h0 * p.o_head * int64_t(dtype_size(p.o_dtype));
    a.q_dtype = p.q_dtype;
    a.kv_dtype = DType::f32;
    a.o_dtype = p.o_dtype;
    a.qs = {p.q_token, p.q_head};
    a.ks = {Hc * Dk, Dk};
    a.vs = {Hc * d.dv, d.dv};
    a.os = {p.o_token, p.o_head};
    for (size_t s = 0; s < p.seqs.size(); ++s) {
      const MlaSeq& seq = p.seqs[s];
      a.seqs.push_back({seq.q_offset, first[s] * a.ks.token, first[s] * a.vs.token, seq.o_offset, seq.Tq, seq.Tk});
    }
    attention_prefill_run(a);
  }
}

namespace {

// softmax(scale * q_abs . [c_kv ; k_pe]) c_kv for every head is multi-query attention over the latent rows
// with head dim r + dr and value dim r, the value being the first r columns of the key rows (same memory, read
// through a second view). Two kernels can run it:
//
// The decode kernel, for a few new tokens against a cache: one task per chunk of keys holds every head's
// query rows, so each latent row is read from memory once for all heads, and long caches split across
// threads. The problem is built directly (its public entry caps head_dim at 512; DeepSeek's r + dr is 576).
void absorbed_attention_decode(const MlaProblem& p, const float* q_abs, float* o_lat) {
  const MlaDims& d = p.dims;
  DecodeProblem a;
  a.B = int64_t(p.seqs.size());
  a.Tq = p.seqs.front().Tq;
  a.Hq = d.H;
  a.Hkv = 1;
  a.D = d.latent_dim();
  a.Dv = d.r;
  a.scale = p.scale;
  a.opts.causal = p.causal;
  a.opts.scale = p.scale;
  a.q = q_abs;
  a.q_dtype = DType::f32;
  a.q_token = d.H * a.D;
  a.q_batch = a.Tq * a.q_token;
  a.q_head = a.D;
  a.o = o_lat;
  a.o_dtype = DType::f32;
  a.o_token = d.H * d.r;
  a.o_batch = a.Tq * a.o_token;
  a.o_head = d.r;
  a.k = a.v = p.latent;
  a.kv_dtype = p.latent_dtype;
  a.k_block = a.v_block = p.latent_block;
  a.k_token = a.v_token = p.latent_token;
  a.k_head = a.v_head = 0;
  a.block_size = p.block_size;
  a.seqlens = p.cache_seqlens;
  a.block_table = p.block_table;
  a.max_blocks_per_seq = p.max_blocks_per_seq;
  a.k_scale = a.v_scale = p.latent_scale;  // keys and values are the same rows
  attention_decode_run(a);
}

// The tiled prefill kernel, for longer query spans: one task per (sequence, head block, query block). It
// reads a paged cache through the block table itself.
void absorbed_attention_prefill(const MlaProblem& p, const float* q_abs, float* o_lat) {
  const MlaDims& d = p.dims;
  const int64_t L = d.latent_dim();
  // One attention "sequence" per (sequence, head block): every head shares the key tiles, but batch-1 decode
  // still needs several tasks to use every core.
  const int64_t nseq = int64_t(p.seqs.size());
  const int64_t want_tasks = int64_t(ThreadPool::global().num_threads());
  const int64_t blocks_per_seq = std::min(d.H, (want_tasks + nseq - 1) / std::max<int64_t>(nseq, 1));
  const int64_t Hc = divisor_at_most(d.H, (d.H + blocks_per_seq - 1) / std::max<int64_t>(blocks_per_seq, 1));

  AttentionProblem a = base_attention_problem(p);
  a.Hq = Hc;
  a.Hkv = 1;
  a.D = L;
  a.Dv = d.r;
  a.q = q_abs;
  a.k = a.v = p.latent;
  a.o = o_lat;
  a.q_dtype = DType::f32;
  a.kv_dtype = p.latent_dtype;
  a.o_dtype = DType::f32;
  a.qs = {d.H * L, L};
  a.ks = a.vs = {p.latent_token, 0};
  a.os = {d.H * d.r, d.r};
  a.block_size = p.block_size;
  a.k_block = a.v_block = p.latent_block;
  a.k_scale = a.v_scale = p.latent_scale;
  int64_t qrow = 0;
  for (const MlaSeq& seq : p.seqs) {
    for (int64_t h0 = 0; h0 < d.H; h0 += Hc)
      a.seqs.push_back({qrow * a.qs.token + h0 * L, seq.latent_offset, seq.latent_offset,
                        qrow * a.os.token + h0 * d.r, seq.Tq, seq.Tk, seq.blocks, seq.cache_row});
    qrow += seq.Tq;
  }
  attention_prefill_run(a);
}

}  // namespace

void mla_run_absorbed(const MlaProblem& p) {
  const MlaDims& d = p.dims;
  const int64_t M = p.total_q();
  if (M == 0) return;
  const int64_t Dq = d.qk_dim(), L = d.latent_dim(), H = d.H;
  // Queries as f32 [M, H, dn + dr], rows in sequence order.
  AlignedBuffer<float> q(size_t(M * H * Dq));
  int64_t row = 0;
  for (const MlaSeq& s : p.seqs)
    for (int64_t i = 0; i < s.Tq; ++i, ++row)
      for (int64_t h = 0; h < H; ++h)
        convert_to_f32(offset_bytes(p.q, p.q_dtype, s.q_offset + i * p.q_token + h * p.q_head), p.q_dtype,
                       q.data() + (row * H + h) * Dq, size_t(Dq));

  // q_abs [M, H, r + dr] = [q_nope_h W_UK_h ; q_pe_h].
  AlignedBuffer<float> q_abs(size_t(M * H * L));
  WeightMatmul absorb;
  absorb.batch = H;
  absorb.M = M;
  absorb.N = d.r;
  absorb.K = d.dn;
  absorb.a = q.data();
  absorb.lda = H * Dq;
  absorb.a_batch = Dq;
  absorb.w = p.w;
  absorb.w_dtype = p.w_dtype;
  absorb.w_k_stride = p.w_row;
  absorb.w_n_stride = 1;
  absorb.w_batch = (d.dn + d.dv) * p.w_row;
  absorb.c = q_abs.data();
  absorb.ldc = H * L;
  absorb.c_batch = L;
  weight_matmul(absorb);
  for (int64_t m = 0; m < M * H; ++m)
    std::memcpy(q_abs.data() + m * L + d.r, q.data() + m * Dq + d.dn, size_t(d.dr) * 4);

  AlignedBuffer<float> o_lat(size_t(M * H * d.r));
  // The decode kernel wants the same few new tokens in every sequence (a padded batch).
  const bool same_tq = std::all_of(p.seqs.begin(), p.seqs.end(),
                                   [&](const MlaSeq& s) { return s.Tq == p.seqs.front().Tq; });
  if (p.cache_seqlens && same_tq && p.seqs.front().Tq <= kMaxDecodeQueries)
    absorbed_attention_decode(p, q_abs.data(), o_lat.data());
  else
    absorbed_attention_prefill(p, q_abs.data(), o_lat.data());

  // out_h = o_lat_h W_UV_h^T.
  AlignedBuffer<float> o(size_t(M * H * d.dv));
  WeightMatmul expand;
  expand.batch = H;
  expand.M = M;
  expand.N = d.dv;
  expand.K = d.r;
  expand.a = o_lat.data();
  expand.lda = H * d.r;
  expand.a_batch = d.r;
  expand.w = offset_bytes(p.w, p.w_dtype, p.w_uv(0));
  expand.w_dtype = p.w_dtype;
  expand.w_k_stride = 1;
  expand.w_n_stride = p.w_row;
  expand.w_batch = (d.dn + d.dv) * p.w_row;
  expand.c = o.data();
  expand.ldc = H * d.dv;
  expand.c_batch = d.dv;
  weight_matmul(expand);

  row = 0;
  const size_t o_elem = dtype_size(p.o_dtype);
  for (const MlaSeq& s : p.seqs)
    for (int64_t i = 0; i < s.Tq; ++i, ++row)
      for (int64_t h = 0; h < H; ++h)
        convert_from_f32(o.data() + (row * H + h) * d.dv,
                         static_cast<char*>(p.o) + (s.o_offset + i * p.o_token + h * p.o_head) * int64_t(o_elem),
                         p.o_dtype, size_t(d.dv));
}

void mla_prefill(const TensorView& q, const TensorView& latent, const MlaWeights& weights, const TensorView& out,
                 const MlaOptions& opts, const VarlenInfo& varlen) {
  mla_run_naive(make_mla_prefill_problem(q, latent, weights, out, opts, varlen));
}

void mla_prefill(const TensorView& q, const LatentCacheView& cache, const MlaWeights& weights,
                 const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen) {
  mla_run_naive(make_mla_cache_problem(q, cache, weights, out, opts, varlen));
}

void mla_prefill_reference(const TensorView& q, const TensorView& latent, const MlaWeights& weights,
                           const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen) {
  mla_run_reference(make_mla_prefill_problem(q, latent, weights, out, opts, varlen));
}

void mla_prefill_reference(const TensorView& q, const LatentCacheView& cache, const MlaWeights& weights,
                           const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen) {
  mla_run_reference(make_mla_cache_problem(q, cache, weights, out, opts, varlen));
}

void mla_decode_reference(const TensorView& q, const LatentCacheView& cache, const MlaWeights& weights,
                          const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen) {
  mla_run_reference(make_mla_cache_problem(q, cache, weights, out, opts, varlen));
}

}  // namespace attnzoo
