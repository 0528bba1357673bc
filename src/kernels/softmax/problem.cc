#include "kernels/softmax/problem.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/float_dtype.h"
#include "kernels/softmax/varlen_spans.h"

namespace attnzoo {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// Views q/k/v/out as [tokens..., H, D] with a contiguous last dim; returns the token stride.
TokenStrides token_strides(const TensorView& t) {
  return {t.stride(t.ndim - 3), t.stride(t.ndim - 2)};
}

void check_strides(const TensorView& t, const char* name) {
  if (t.numel() == 0) return;  // empty arrays report arbitrary strides and are never read
  require(t.stride(-1) == 1, name, "last dimension (head_dim) must be contiguous (stride 1), got stride " +
                                      str(t.stride(-1)));
  for (int d = 0; d < t.ndim; ++d)
    require(t.strides[d] >= 0, name, "negative strides are not supported");
}

}  // namespace

void check_float_operand(const TensorView& t, const char* name) {
  require(t.data != nullptr || t.numel() == 0, name, "is null");
  require_float_dtype(t, name);
}

void check_float_tensor(const TensorView& t, const char* name) {
  require_host(t, name);
  check_float_operand(t, name);
}

float resolve_scale(float scale, int64_t D) {
  if (std::isnan(scale)) return 1.f / std::sqrt(float(D));
  require(std::isfinite(scale) && scale > 0.f, "scale", "must be a finite positive number");
  return scale;
}

void check_head_options(const AttentionOptions& o, int64_t Hq) {
  // Runs on every decode step: messages are formatted only on failure.
  require(o.window >= 0, "window", [&] { return "must be >= 0 (0 or None means no window), got " + str(o.window); });
  require(std::isfinite(o.softcap) && o.softcap >= 0.f, "softcap", "must be a finite number >= 0");
  auto head = [](int64_t h) { return [h] { return "must be finite (head " + str(h) + ")"; }; };
  for (int64_t h = 0; h < Hq; ++h) {
    if (o.sinks) require(std::isfinite(o.sinks[h]), "sinks", head(h));
    if (o.alibi_slopes) require(std::isfinite(o.alibi_slopes[h]), "alibi_slopes", head(h));
  }
}

int64_t AttentionProblem::max_tq() const {
  int64_t m = 0;
  for (const auto& s : seqs) m = std::max(m, s.Tq);
  return m;
}

namespace {

// What every prefill problem shares once q, k, v and out have passed their layout checks: head counts, head
// dims, options, pointers, dtypes and token strides. k and v are named as the caller knows them.
AttentionProblem start_problem(const TensorView& q, const TensorView& k, const TensorView& v,
                               const TensorView& out, const AttentionOptions& opts, const char* k_name,
                               const char* v_name) {
  require(k.dtype == v.dtype, v_name, std::string("dtype ") + dtype_name(v.dtype) + " differs from " + k_name +
                                          "'s " + dtype_name(k.dtype));
  AttentionProblem p;
  p.Hq = q.size(-2);
  p.Hkv = k.size(-2);
  p.D = q.size(-1);
  p.Dv = v.size(-1);
  require(p.Hq >= 1, "q", "needs at least one head, got " + q.shape_str());
  require(p.Hkv >= 1, k_name, "needs at least one head, got " + k.shape_str());
  require(v.size(-2) == p.Hkv, v_name, "has " + str(v.size(-2)) + " heads, " + k_name + " has " + str(p.Hkv));
  require(p.Hq % p.Hkv == 0, "q", "head count " + str(p.Hq) + " is not a multiple of " + k_name + "'s " +
                                      str(p.Hkv) + " (GQA needs Hq = group * Hkv)");
  const std::string dim_range = "head_dim must be in [1, " + str(kMaxHeadDim) + "], got ";
  require(p.D >= 1 && p.D <= kMaxHeadDim, "q", dim_range + str(p.D));
  require(k.size(-1) == p.D, k_name, "head_dim " + str(k.size(-1)) + " differs from q's " + str(p.D));
  require(p.Dv >= 1 && p.Dv <= kMaxHeadDim, v_name, dim_range + str(p.Dv));
  require(out.size(-2) == p.Hq && out.size(-1) == p.Dv, "out",
          "must have " + str(p.Hq) + " heads of dim " + str(p.Dv) + ", got " + out.shape_str());
  check_head_options(opts, p.Hq);
  p.scale = resolve_scale(opts.scale, p.D);
  p.opts = opts;
  p.device = q.device;
  p.q = q.data; p.k = k.data; p.v = v.data; p.o = out.data;
  p.q_dtype = q.dtype; p.kv_dtype = k.dtype; p.o_dtype = out.dtype;
  p.qs = token_strides(q); p.ks = token_strides(k); p.vs = token_strides(v); p.os = token_strides(out);
  return p;
}

void check_token_layout(const TensorView& t, const char* name, bool packed) {
  if (packed) {
    require(t.ndim == 3 || (t.ndim == 4 && t.shape[0] == 1), name,
            "with cu_seqlens must be [total, H, D] or [1, total, H, D], got " + t.shape_str());
  } else {
    require(t.ndim == 4, name, "must be [batch, time, heads, head_dim], got " + t.shape_str());
  }
  check_strides(t, name);
}

// cu_seqlens_q checked and turned into per-sequence (start, length) pairs.
std::vector<std::pair<int64_t, int64_t>> query_spans(const VarlenInfo& varlen, int64_t total_q) {
  const int64_t n = varlen.num_seqs;
  require(n >= 1, "cu_seqlens", "needs at least 2 entries (one sequence)");
  const int32_t* cq = varlen.cu_seqlens_q;
  require(cq[0] == 0, "cu_seqlens", "must start at 0");
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (int64_t s = 0; s < n; ++s) {
    require(cq[s + 1] >= cq[s], "cu_seqlens", "must be non-decreasing (entry " + str(s + 1) + ")");
    spans.emplace_back(cq[s], cq[s + 1] - cq[s]);
  }
  require(cq[n] == total_q, "cu_seqlens", "last entry " + str(cq[n]) + " must equal q's token count " +
                                              str(total_q));
  return spans;
}

void check_block_mask_covers(const AttentionProblem& p) {
  if (!p.opts.block_mask) return;
  for (const auto& s : p.seqs)
    require(s.Tk <= p.opts.block_mask->spec().seq_len, "block_mask",
            "covers " + str(p.opts.block_mask->spec().seq_len) + " tokens, a sequence has " + str(s.Tk));
}

}  // namespace

AttentionProblem make_prefill_problem(const TensorView& q, const TensorView& k, const TensorView& v,
                                      const TensorView& out, const AttentionOptions& opts,
                                      const VarlenInfo& varlen) {
  // The one prefill that also runs on a GPU: its operands may live on any device, all on the same one. Only
  // shapes and strides are read here; cu_seqlens, sinks and slopes are host metadata on every device.
  check_float_operand(q, "q");
  for (auto [t, name] : {std::pair{&k, "k"}, {&v, "v"}, {&out, "out"}}) {
    require(t->device == q.device, name, [&] { return "lives on " + t->device.str() + ", q on " + q.device.str(); });
    check_float_operand(*t, name);
  }
  const bool packed = varlen.cu_seqlens_q != nullptr;
  require(varlen.cu_seqlens_k == nullptr || packed, "cu_seqlens_k", "given without cu_seqlens_q");
  for (auto [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}}) check_token_layout(*t, name, packed);
  AttentionProblem p = start_problem(q, k, v, out, opts, "k", "v");

  if (packed) {
    const int64_t total_q = q.size(-3), total_k = k.size(-3);
    require(v.size(-3) == total_k, "v", "token count differs from k's");
    require(out.size(-3) == total_q, "out", "token count differs from q's");
    for (const VarlenSpan& s : varlen_spans(varlen, total_q, total_k, "k", "keys"))
      p.seqs.push_back({s.q_start * p.qs.token, s.k_start * p.ks.token, s.k_start * p.vs.token,
                        s.q_start * p.os.token, s.Tq, s.Tk});
  } else {
    const int64_t B = q.shape[0], Tq = q.shape[1], Tk = k.shape[1];
    require(k.shape[0] == B && v.shape[0] == B && out.shape[0] == B, "k", "batch sizes of q, k, v, out differ");
    require(v.shape[1] == Tk, "v", "time length differs from k's");
    require(out.shape[1] == Tq, "out", "time length differs from q's");
    require(Tq <= Tk, "q", "has more time steps (" + str(Tq) + ") than k (" + str(Tk) + ")");
    for (int64_t b = 0; b < B; ++b)
      p.seqs.push_back({b * q.strides[0], b * k.strides[0], b * v.strides[0], b * out.strides[0], Tq, Tk});
  }
  check_block_mask_covers(p);
  return p;
}

AttentionProblem make_cached_prefill_problem(const TensorView& q, const KvCacheView& cache, const TensorView& out,
                                             const AttentionOptions& opts, const VarlenInfo& varlen) {
  check_float_tensor(q, "q");
  check_kv_cache_dtype(cache.k, "k_cache");
  check_kv_cache_dtype(cache.v, "v_cache");
  check_float_tensor(out, "out");
  const bool packed = varlen.cu_seqlens_q != nullptr, paged = cache.block_table != nullptr;
  require(varlen.cu_seqlens_k == nullptr, "cu_seqlens_k",
          "is not used with a KV cache (cache_seqlens / seqused_k gives each sequence's keys)");
  check_token_layout(q, "q", packed);
  check_token_layout(out, "out", packed);
  const char* layout = paged ? "[num_blocks, block_size, kv_heads, head_dim] (paged)"
                             : "[batch, max_seqlen, kv_heads, head_dim]";
  for (auto [t, name] : {std::pair{&cache.k, "k_cache"}, {&cache.v, "v_cache"}}) {
    require(t->ndim == 4, name, std::string("must be ") + layout + ", got " + t->shape_str());
    check_strides(*t, name);
  }
  for (int d = 0; d < 3; ++d)
    require(cache.v.shape[d] == cache.k.shape[d], "v_cache",
            "shape " + cache.v.shape_str() + " must match k_cache's " + cache.k.shape_str() + " except head_dim");
  AttentionProblem p = start_problem(q, cache.k, cache.v, out, opts, "k_cache", "v_cache");
  require(out.size(-3) == q.size(-3) && (packed || out.shape[0] == q.shape[0]), "out",
          "batch and time must match q's, got " + out.shape_str());

  struct QuerySpan {
    int64_t q_offset, o_offset, Tq;
  };
  std::vector<QuerySpan> spans;
  if (packed) {
    for (const auto& [first, Tq] : query_spans(varlen, q.size(-3)))
      spans.push_back({first * p.qs.token, first * p.os.token, Tq});
  } else {
    for (int64_t b = 0; b < q.shape[0]; ++b) spans.push_back({b * q.strides[0], b * out.strides[0], q.shape[1]});
  }
  const int64_t B = int64_t(spans.size());
  if (!paged)
    require(cache.k.shape[0] == B, "k_cache", "batch " + str(cache.k.shape[0]) + " differs from q's " + str(B) +
                                                  " (pass block_table for a paged cache)");
  std::vector<int64_t> new_tokens;
  for (const auto& s : spans) new_tokens.push_back(s.Tq);
  check_cache_lengths({cache.cache_seqlens, cache.block_table, cache.max_blocks_per_seq, cache.k.shape[1],
                       cache.k.shape[0], "k_cache"},
                      new_tokens);
  p.block_size = cache.k.shape[1];
  p.k_block = cache.k.strides[0];
  p.v_block = cache.v.strides[0];
  p.k_scale = check_kv_scale(cache.k, cache.k_scale, "k_cache", "k_scale");
  p.v_scale = check_kv_scale(cache.v, cache.v_scale, "v_cache", "v_scale");
  for (int64_t b = 0; b < B; ++b) {
    const QuerySpan& q_span = spans[size_t(b)];
    const int32_t* blocks = paged ? cache.block_table + b * cache.max_blocks_per_seq : nullptr;
    p.seqs.push_back({q_span.q_offset, b * p.k_block, b * p.v_block, q_span.o_offset, q_span.Tq,
                      cache.cache_seqlens[b], blocks, b});
  }
  check_block_mask_covers(p);
  return p;
}

}  // namespace attnzoo
