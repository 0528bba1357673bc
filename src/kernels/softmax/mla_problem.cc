#include "kernels/softmax/mla_problem.h"

#include <string>

#include "core/convert.h"
#include "core/error.h"
#include "kernels/softmax/varlen_spans.h"

namespace attnzoo {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// `on` is the device every operand must share; only mla_decode passes a non-CPU one (its CUDA path), the other
// entries keep refusing device tensors through check_float_tensor.
void check_layout(const TensorView& t, const char* name, Device on = Device::cpu()) {
  if (on.is_cpu()) {
    check_float_tensor(t, name);
  } else {
    check_float_operand(t, name);
    require(t.device == on, name, [&] { return "lives on " + t.device.str() + ", q on " + on.str(); });
  }
  require(t.ndim >= 1, name, "must have at least one dimension");
  // An empty array's strides are arbitrary (numpy gives it stride 0), and it is never read.
  require(t.stride(-1) == 1 || t.numel() == 0, name, "last dimension must be contiguous (stride 1)");
  for (int d = 0; d < t.ndim; ++d) require(t.strides[d] >= 0, name, "negative strides are not supported");
}

MlaDims check_weights(const MlaWeights& w, Device on) {
  MlaDims d{w.num_heads, w.qk_nope_head_dim, w.qk_rope_head_dim, w.v_head_dim, w.kv_lora_rank};
  require(d.H >= 1, "num_heads", "must be >= 1, got " + str(d.H));
  require(d.dn >= 1, "qk_nope_head_dim", "must be >= 1, got " + str(d.dn));
  require(d.dr >= 0, "qk_rope_head_dim", "must be >= 0, got " + str(d.dr));
  require(d.dv >= 1, "v_head_dim", "must be >= 1, got " + str(d.dv));
  require(d.r >= 1, "kv_lora_rank", "must be >= 1, got " + str(d.r));
  check_layout(w.w_kv_b, "w_kv_b", on);
  require(w.w_kv_b.ndim == 2 && w.w_kv_b.shape[0] == d.H * (d.dn + d.dv) && w.w_kv_b.shape[1] == d.r, "w_kv_b",
          "must be [num_heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank] = [" + str(d.H * (d.dn + d.dv)) +
              ", " + str(d.r) + "], got " + w.w_kv_b.shape_str());
  return d;
}

// Fills the fields shared by prefill and decode problems from q, out and the weights.
MlaProblem start_problem(const TensorView& q, const TensorView& out, const MlaWeights& weights,
                         const MlaOptions& opts, bool any_device = false) {
  MlaProblem p;
  p.device = any_device ? q.device : Device::cpu();
  p.dims = check_weights(weights, p.device);
  const MlaDims& d = p.dims;
  check_layout(q, "q", p.device);
  check_layout(out, "out", p.device);
  require(q.ndim >= 3 && q.size(-2) == d.H && q.size(-1) == d.qk_dim(), "q",
          "must end in [num_heads, qk_nope_head_dim + qk_rope_head_dim] = [" + str(d.H) + ", " + str(d.qk_dim()) +
              "], got " + q.shape_str());
  require(out.ndim == q.ndim && out.size(-2) == d.H && out.size(-1) == d.dv, "out",
          "must end in [num_heads, v_head_dim] = [" + str(d.H) + ", " + str(d.dv) + "] with q's rank, got " +
              out.shape_str());
  p.scale = resolve_scale(opts.scale, d.qk_dim());
  p.causal = opts.causal;
  p.q = q.data;
  p.o = out.data;
  p.w = weights.w_kv_b.data;
  p.q_dtype = q.dtype;
  p.o_dtype = out.dtype;
  p.w_dtype = weights.w_kv_b.dtype;
  p.q_token = q.stride(-3);
  p.q_head = q.stride(-2);
  p.o_token = out.stride(-3);
  p.o_head = out.stride(-2);
  p.w_row = weights.w_kv_b.strides[0];
  return p;
}

}  // namespace

int64_t MlaProblem::total_q() const {
  int64_t n = 0;
  for (const auto& s : seqs) n += s.Tq;
  return n;
}

int64_t MlaProblem::total_k() const {
  int64_t n = 0;
  for (const auto& s : seqs) n += s.Tk;
  return n;
}

MlaProblem make_mla_prefill_problem(const TensorView& q, const TensorView& latent, const MlaWeights& weights,
                                    const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen) {
  MlaProblem p = start_problem(q, out, weights, opts);
  check_layout(latent, "kv_latent");
  require(latent.size(-1) == p.dims.latent_dim(), "kv_latent",
          "last dim must be kv_lora_rank + qk_rope_head_dim = " + str(p.dims.latent_dim()) + ", got " +
              latent.shape_str());
  p.latent = latent.data;
  p.latent_dtype = latent.dtype;
  p.latent_token = latent.stride(-2);
  const bool packed = varlen.cu_seqlens_q != nullptr;
  require(varlen.cu_seqlens_k == nullptr || packed, "cu_seqlens_k", "given without cu_seqlens");
  if (!packed) {
    require(q.ndim == 4, "q", "must be [batch, time, heads, head_dim], got " + q.shape_str());
    require(latent.ndim == 3, "kv_latent", "must be [batch, time, kv_lora_rank + qk_rope_head_dim], got " +
                                            latent.shape_str());
    const int64_t B = q.shape[0], Tq = q.shape[1], Tk = latent.shape[1];
    require(latent.shape[0] == B, "kv_latent", "batch " + str(latent.shape[0]) + " differs from q's " + str(B));
    require(out.shape[0] == B && out.shape[1] == Tq, "out", "batch and time must match q's, got " +
                                                                out.shape_str());
    require(Tq <= Tk, "q", "has more time steps (" + str(Tq) + ") than kv_latent (" + str(Tk) + ")");
    for (int64_t b = 0; b < B; ++b)
      p.seqs.push_back({b * q.strides[0], b * out.strides[0], b * latent.strides[0], nullptr, Tq, Tk});
    return p;
  }
  require(q.ndim == 3 || (q.ndim == 4 && q.shape[0] == 1), "q",
          "with cu_seqlens must be [total, heads, head_dim] or [1, total, heads, head_dim], got " + q.shape_str());
  require(latent.ndim == 2 || (latent.ndim == 3 && latent.shape[0] == 1), "kv_latent",
          "with cu_seqlens must be [total, kv_lora_rank + qk_rope_head_dim] (or with a leading 1), got " +
              latent.shape_str());
  require(out.size(-3) == q.size(-3), "out", "token count differs from q's");
  for (const VarlenSpan& s : varlen_spans(varlen, q.size(-3), latent.size(-2), "kv_latent", "latent rows"))
    p.seqs.push_back({s.q_start * p.q_token, s.q_start * p.o_token, s.k_start * p.latent_token, nullptr, s.Tq, s.Tk});
  return p;
}

void MlaProblem::load_latent_row(const MlaSeq& s, int64_t j, float* dst) const {
  const char* row = static_cast<const char*>(latent) + latent_row(s, j) * int64_t(dtype_size(latent_dtype));
  const int64_t L = dims.latent_dim();
  if (!latent_scale.data) return convert_to_f32(row, latent_dtype, dst, size_t(L));
  const float scale = s.blocks ? latent_scale.at(s.blocks[j / block_size], j % block_size, 0)
                               : latent_scale.at(s.cache_row, j, 0);
  dequantize_kv_row(row, latent_dtype, scale, dst, size_t(L));
}

MlaProblem make_mla_cache_problem(const TensorView& q, const LatentCacheView& cache, const MlaWeights& weights,
                                  const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen,
                                  bool any_device) {
  MlaProblem p = start_problem(q, out, weights, opts, any_device);
  const bool packed = varlen.cu_seqlens_q != nullptr, paged = cache.block_table != nullptr;
  require(varlen.cu_seqlens_k == nullptr, "cu_seqlens_k",
          "is not used with a latent cache (cache_seqlens gives each sequence's rows)");
  struct QuerySpan {
    int64_t q_offset, o_offset, Tq;
  };
  std::vector<QuerySpan> spans;
  if (packed) {
    require(q.ndim == 3 || (q.ndim == 4 && q.shape[0] == 1), "q",
            "with cu_seqlens must be [total, heads, head_dim] or [1, total, heads, head_dim], got " + q.shape_str());
    require(out.size(-3) == q.size(-3), "out", "token count differs from q's");
    const int64_t n = varlen.num_seqs;
    require(n >= 1, "cu_seqlens", "needs at least 2 entries (one sequence)");
    const int32_t* cq = varlen.cu_seqlens_q;
    require(cq[0] == 0, "cu_seqlens", "must start at 0");
    for (int64_t s = 0; s < n; ++s) {
      require(cq[s + 1] >= cq[s], "cu_seqlens", "must be non-decreasing (entry " + str(s + 1) + ")");
      spans.push_back({cq[s] * p.q_token, cq[s] * p.o_token, cq[s + 1] - cq[s]});
    }
    require(cq[n] == q.size(-3), "cu_seqlens", "last entry " + str(cq[n]) + " must equal q's token count " +
                                                   str(q.size(-3)));
  } else {
    require(q.ndim == 4, "q", "must be [batch, new_tokens, heads, head_dim], got " + q.shape_str());
    require(q.shape[1] >= 1, "q", "needs at least one new token");
    require(out.shape[0] == q.shape[0] && out.shape[1] == q.shape[1], "out",
            "batch and time must match q's, got " + out.shape_str());
    for (int64_t b = 0; b < q.shape[0]; ++b) spans.push_back({b * q.strides[0], b * out.strides[0], q.shape[1]});
  }
  const int64_t B = int64_t(spans.size());
  const TensorView& c = cache.latent;
  if (p.device.is_cpu()) {
    check_kv_cache_dtype(c, "latent_cache");
  } else {
    check_kv_cache_operand(c, "latent_cache");
    require(c.device == p.device, "latent_cache",
            [&] { return "lives on " + c.device.str() + ", q on " + p.device.str(); });
    // Refused before check_kv_scale, which reads the scales on the host.
    if (is_quantized_kv(c.dtype))
      throw DTypeError(std::string("latent_cache: ") + dtype_name(c.dtype) +
                       " latent caches run on the CPU only for now; on CUDA use bfloat16, float16 or float32");
  }
  require(c.ndim >= 1 && (c.stride(-1) == 1 || c.numel() == 0), "latent_cache",
          "last dimension must be contiguous (stride 1)");
  for (int d = 0; d < c.ndim; ++d) require(c.strides[d] >= 0, "latent_cache", "negative strides are not supported");
  const int64_t L = p.dims.latent_dim();
  const std::string shapes = "[batch, max_seqlen, " + str(L) + "] or [num_blocks, block_size, " + str(L) +
                             "] (kv_lora_rank + qk_rope_head_dim; a head axis of 1 before it is fine)";
  require((c.ndim == 3 || (c.ndim == 4 && c.shape[2] == 1)) && c.size(-1) == L, "latent_cache",
          "must be " + shapes + ", got " + c.shape_str());
  p.latent = c.data;
  p.latent_dtype = c.dtype;
  p.latent_token = c.strides[1];
  p.latent_block = c.strides[0];
  // Named `k_scale` as vLLM names the MLA cache's scale (and the Python argument): `scale` is the softmax scale.
  p.latent_scale = check_kv_scale(c, cache.scale, "latent_cache", "k_scale");
  p.block_size = c.shape[1];  // a contiguous cache is one block of S_max rows per sequence
  p.cache_seqlens = cache.cache_seqlens;
  p.block_table = cache.block_table;
  p.max_blocks_per_seq = cache.max_blocks_per_seq;
  if (!paged)
    require(c.shape[0] == B, "latent_cache", "batch " + str(c.shape[0]) + " differs from q's " + str(B) +
                                                 " (pass block_table for a paged cache)");
  std::vector<int64_t> new_tokens;
  for (const auto& s : spans) new_tokens.push_back(s.Tq);
  check_cache_lengths({cache.cache_seqlens, cache.block_table, cache.max_blocks_per_seq, p.block_size, c.shape[0],
                       "latent_cache"},
                      new_tokens);
  for (int64_t b = 0; b < B; ++b) {
    const QuerySpan& span = spans[size_t(b)];
    MlaSeq s{span.q_offset, span.o_offset, b * c.strides[0], nullptr, span.Tq, cache.cache_seqlens[b], b};
    if (paged) {
      s.blocks = cache.block_table + b * cache.max_blocks_per_seq;
      s.latent_offset = 0;
    }
    p.seqs.push_back(s);
  }
  return p;
}

}  // namespace attnzoo
