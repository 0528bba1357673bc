// Boundary checks for decode: everything the kernel later trusts (shapes, strides, lengths, block ids) is
// verified here, once per call. Cache contents are not scanned (that would read the whole cache again and
// double the cost of a bandwidth-bound kernel); NaN / Inf in the cache propagate to the outputs that see them.
// These checks run on every decode step, which allocates nothing: messages are formatted only on failure.
#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/softmax/decode_problem.h"
#include "kernels/softmax/kv_quant.h"
#include "kernels/softmax/problem.h"

namespace attnzoo {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

void check_layout(const TensorView& t, const char* name, const char* layout) {
  require(t.ndim == 4, name, [&] { return std::string("must be ") + layout + ", got " + t.shape_str(); });
  require(t.stride(-1) == 1 || t.size(-1) == 1 || t.numel() == 0, name,  // empty: strides are arbitrary
          [&] { return "last dimension (head_dim) must be contiguous (stride 1), got stride " + str(t.stride(-1)); });
  for (int d = 0; d < t.ndim; ++d) require(t.strides[d] >= 0, name, "negative strides are not supported");
}

}  // namespace

DecodeProblem make_decode_problem(const TensorView& q, const KvCacheView& cache, const TensorView& out,
                                  const AttentionOptions& opts) {
  // Decode also runs on a GPU: q, out, the caches and their scales on one device (any); cache_seqlens, the
  // block table, sinks and slopes are host metadata on every device.
  for (auto [t, name] : {std::pair{&cache.k, "k_cache"}, {&cache.v, "v_cache"}, {&out, "out"},
                         {&cache.k_scale, "k_scale"}, {&cache.v_scale, "v_scale"}}) {
    if (t->data == nullptr && t != &cache.k && t != &cache.v && t != &out) continue;
    require(t->device == q.device, name, [&] { return "lives on " + t->device.str() + ", q on " + q.device.str(); });
  }
  check_float_operand(q, "q");
  check_kv_cache_operand(cache.k, "k_cache");
  check_kv_cache_operand(cache.v, "v_cache");
  check_float_operand(out, "out");
  const bool paged = cache.block_table != nullptr;
  const char* cache_layout = paged ? "[num_blocks, block_size, kv_heads, head_dim] (paged)"
                                   : "[batch, max_seqlen, kv_heads, head_dim]";
  check_layout(q, "q", "[batch, new_tokens, heads, head_dim]");
  check_layout(cache.k, "k_cache", cache_layout);
  check_layout(cache.v, "v_cache", cache_layout);
  check_layout(out, "out", "[batch, new_tokens, heads, v_head_dim]");
  require(cache.k.dtype == cache.v.dtype, "v_cache", [&] {
    return std::string("dtype ") + dtype_name(cache.v.dtype) + " differs from k_cache's " + dtype_name(cache.k.dtype);
  });

  DecodeProblem p;
  p.B = q.shape[0];
  p.Tq = q.shape[1];
  p.Hq = q.shape[2];
  p.D = q.shape[3];
  p.Hkv = cache.k.shape[2];
  p.Dv = cache.v.shape[3];
  require(p.Tq >= 1 && p.Tq <= kMaxDecodeQueries, "q", [&] {
    return "new_tokens (dim 1) must be in [1, " + str(kMaxDecodeQueries) + "], got " + str(p.Tq) +
           " (use prefill attention for longer spans)";
  });
  require(p.Hq >= 1, "q", "needs at least one head");
  require(p.Hkv >= 1, "k_cache", "needs at least one kv head");
  require(p.Hq % p.Hkv == 0, "q", [&] {
    return "head count " + str(p.Hq) + " is not a multiple of k_cache's " + str(p.Hkv) + " (GQA needs Hq = group * Hkv)";
  });
  auto dim_range = [](int64_t d) { return "head_dim must be in [1, " + str(kMaxHeadDim) + "], got " + str(d); };
  require(p.D >= 1 && p.D <= kMaxHeadDim, "q", [&] { return dim_range(p.D); });
  require(cache.k.shape[3] == p.D, "k_cache",
          [&] { return "head_dim " + str(cache.k.shape[3]) + " differs from q's " + str(p.D); });
  require(p.Dv >= 1 && p.Dv <= kMaxHeadDim, "v_cache", [&] { return dim_range(p.Dv); });
  for (int d = 0; d < 3; ++d)
    require(cache.v.shape[d] == cache.k.shape[d], "v_cache", [&] {
      return "shape " + cache.v.shape_str() + " must match k_cache's " + cache.k.shape_str() + " except head_dim";
    });
  require(out.shape[0] == p.B && out.shape[1] == p.Tq && out.shape[2] == p.Hq && out.shape[3] == p.Dv, "out", [&] {
    return "must be [" + str(p.B) + ", " + str(p.Tq) + ", " + str(p.Hq) + ", " + str(p.Dv) + "], got " +
           out.shape_str();
  });
  check_head_options(opts, p.Hq);
  p.scale = resolve_scale(opts.scale, p.D);
  p.opts = opts;

  p.device = q.device;
  p.q = q.data; p.q_dtype = q.dtype;
  p.q_batch = q.strides[0]; p.q_token = q.strides[1]; p.q_head = q.strides[2];
  p.o = out.data; p.o_dtype = out.dtype;
  p.o_batch = out.strides[0]; p.o_token = out.strides[1]; p.o_head = out.strides[2];
  p.k = cache.k.data; p.v = cache.v.data; p.kv_dtype = cache.k.dtype;
  p.k_block = cache.k.strides[0]; p.k_token = cache.k.strides[1]; p.k_head = cache.k.strides[2];
  p.v_block = cache.v.strides[0]; p.v_token = cache.v.strides[1]; p.v_head = cache.v.strides[2];
  p.block_size = cache.k.shape[1];
  p.k_scale = check_kv_scale(cache.k, cache.k_scale, "k_cache", "k_scale");
  p.v_scale = check_kv_scale(cache.v, cache.v_scale, "v_cache", "v_scale");

  p.seqlens = cache.cache_seqlens;
  if (paged) {
    p.block_table = cache.block_table;
    p.max_blocks_per_seq = cache.max_blocks_per_seq;
  } else {
    require(cache.k.shape[0] == p.B, "k_cache",
            [&] { return "batch " + str(cache.k.shape[0]) + " differs from q's " + str(p.B); });
  }
  check_cache_lengths({cache.cache_seqlens, cache.block_table, cache.max_blocks_per_seq, p.block_size,
                       cache.k.shape[0], "k_cache"},
                      p.B, p.Tq);
  int64_t longest = 0;
  for (int64_t b = 0; b < p.B; ++b) longest = std::max<int64_t>(longest, p.seqlens[b]);
  if (opts.block_mask)
    require(longest <= opts.block_mask->spec().seq_len, "block_mask", [&] {
      return "covers " + str(opts.block_mask->spec().seq_len) + " tokens, a sequence has " + str(longest);
    });
  return p;
}

}  // namespace attnzoo
