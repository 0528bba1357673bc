#include "kernels/softmax/cuda/decode_launch_plan.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/softmax/cuda/decode_cuda.h"

namespace attnzoo {
namespace {
std::string str(int64_t v) { return std::to_string(v); }

bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }

// Every row the kernel copies with 16-byte cp.async (and stores in pairs) must start 16-byte aligned: the base
// and each stride it steps over. A stride of a dimension of extent 1 is never stepped over, so it is free.
struct Stride {
  int64_t value;
  bool used;
  const char* what;
};
void check_rows(const char* name, const void* base, DType t, std::initializer_list<Stride> strides) {
  require(reinterpret_cast<uintptr_t>(base) % 16 == 0, name, "data must be 16-byte aligned on CUDA");
  const int64_t unit = 16 / int64_t(dtype_size(t));
  for (const Stride& s : strides)
    require(!s.used || s.value % unit == 0, name, [&] {
      return std::string(s.what) + " stride must be a multiple of " + str(unit) + " elements on CUDA (16-byte " +
             "rows of " + dtype_name(t) + "), got " + str(s.value);
    });
}
}  // namespace

namespace cuda_decode {
namespace {

// Keys below this are not worth a chunk of their own: the merge and the pipeline's fill would cost more than
// the parallelism gains.
constexpr int64_t kMinChunk = 256;

struct Chunks {
  std::vector<WorkItem> work;
  std::vector<MergeItem> merges;
  int64_t num_slots = 0;
};

// Each sequence's visible keys [begin, len) (begin: the window's start for its first query, on a tile
// boundary) cut into chunks of one length L, a multiple of the tile. L is the shortest (at least kMinChunk)
// that keeps every CTA in one wave of `slots` resident CTAs: all run at once, and the split costs a merge only
// where the GPU would otherwise idle. When even whole sequences overflow a wave, L is a slot's fair share of
// all keys, so that one long sequence does not run alone after the short ones are done.
Chunks plan_chunks(const DecodeProblem& p, int64_t tile, int64_t row_groups, int64_t slots) {
  std::vector<int64_t> begin(size_t(p.B));
  int64_t longest = 0, total = 0;
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t len = p.seqlens[b];
    int64_t first = p.opts.window > 0 ? std::max<int64_t>(0, len - p.Tq - p.opts.window + 1) : 0;
    first = first / tile * tile;
    begin[size_t(b)] = first;
    longest = std::max(longest, len - first);
    total += len - first;
  }
  const int64_t per_range = p.Hkv * row_groups;  // CTAs per chunk of keys
  auto chunks_of = [&](int64_t b, int64_t L) {
    return std::max<int64_t>(1, (p.seqlens[b] - begin[size_t(b)] + L - 1) / L);
  };
  auto ctas = [&](int64_t L) {
    int64_t n = 0;
    for (int64_t b = 0; b < p.B; ++b) n += chunks_of(b, L);
    return n * per_range;
  };
  const int64_t whole = std::max(tile, (longest + tile - 1) / tile * tile);
  int64_t L = whole;
  if (ctas(whole) > slots) {
    const int64_t share = (total * per_range + slots - 1) / slots;
    L = std::min(whole, (std::max(kMinChunk, share) + tile - 1) / tile * tile);
  } else {
    int64_t lo = (kMinChunk + tile - 1) / tile, hi = whole / tile;  // in tiles; ctas(hi * tile) fits
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (ctas(mid * tile) <= slots) hi = mid;
      else lo = mid + 1;
    }
    L = std::min(whole, lo * tile);
  }

  Chunks plan;
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t len = p.seqlens[b], n = chunks_of(b, L);
    for (int64_t hk = 0; hk < p.Hkv; ++hk) {
      if (n > 1) plan.merges.push_back({int32_t(b), int32_t(hk), int32_t(plan.num_slots), int32_t(n)});
      for (int64_t c = 0; c < n; ++c) {
        const int64_t k0 = std::min(len, begin[size_t(b)] + c * L), k1 = std::min(len, k0 + L);
        plan.work.push_back({int32_t(b), int32_t(hk), int32_t(k0), int32_t(k1), int32_t(len),
                             n > 1 ? int32_t(plan.num_slots + c) : -1});
      }
      if (n > 1) plan.num_slots += n;
    }
  }
  // Longest first, so that with more CTAs than slots the long ones start early and the short ones fill the tail;
  // ties keep (sequence, head) order, which puts the heads of one sequence (neighbours in memory) side by side.
  std::stable_sort(plan.work.begin(), plan.work.end(), [](const WorkItem& a, const WorkItem& b) {
    return a.k_end - a.k_begin > b.k_end - b.k_begin;
  });
  return plan;
}

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

}  // namespace

DecodeLaunchPlan plan_decode_launch(const DecodeProblem& p, int64_t tile, int64_t rows_per_cta, int64_t slots) {
  DecodeLaunchPlan plan;
  if (p.B == 0) return plan;
  const int64_t rows = p.rows();
  plan.row_groups = unsigned((rows + rows_per_cta - 1) / rows_per_cta);
  Chunks chunks = plan_chunks(p, tile, plan.row_groups, slots);
  plan.work = std::move(chunks.work);
  plan.merges = std::move(chunks.merges);
  plan.num_slots = chunks.num_slots;

  const size_t work_bytes = plan.work.size() * sizeof(WorkItem), merge_bytes = plan.merges.size() * sizeof(MergeItem);
  const size_t table_bytes = p.block_table ? size_t(p.B * p.max_blocks_per_seq) * sizeof(int32_t) : 0;
  const size_t head_bytes = size_t(p.Hq) * sizeof(float);
  plan.has_table = p.block_table != nullptr;
  plan.has_sinks = p.opts.sinks != nullptr;
  plan.has_slopes = p.opts.alibi_slopes != nullptr;
  plan.merges_at = align16(work_bytes);
  plan.table_at = align16(plan.merges_at + merge_bytes);
  plan.sinks_at = align16(plan.table_at + table_bytes);
  plan.slopes_at = align16(plan.sinks_at + (plan.has_sinks ? head_bytes : 0));
  const size_t meta_bytes = align16(plan.slopes_at + (plan.has_slopes ? head_bytes : 0));
  const size_t partial_rows = size_t(plan.num_slots * rows);
  plan.part_m_at = meta_bytes;
  plan.part_l_at = align16(plan.part_m_at + partial_rows * 4);
  plan.part_o_at = align16(plan.part_l_at + partial_rows * 4);
  plan.device_bytes = plan.part_o_at + partial_rows * size_t(p.D) * 4;

  plan.metadata.resize(meta_bytes);
  unsigned char* host = plan.metadata.data();
  std::memcpy(host, plan.work.data(), work_bytes);
  if (merge_bytes) std::memcpy(host + plan.merges_at, plan.merges.data(), merge_bytes);
  if (table_bytes) std::memcpy(host + plan.table_at, p.block_table, table_bytes);
  if (plan.has_sinks) std::memcpy(host + plan.sinks_at, p.opts.sinks, head_bytes);
  if (plan.has_slopes) std::memcpy(host + plan.slopes_at, p.opts.alibi_slopes, head_bytes);

  int64_t longest = 0;
  for (int64_t b = 0; b < p.B; ++b) longest = std::max<int64_t>(longest, p.seqlens[b]);

  DecodeParams& params = plan.params;
  params.q = p.q;
  params.o = p.o;
  params.k = p.k;
  params.v = p.v;
  params.k_scale = p.k_scale.data;
  params.v_scale = p.v_scale.data;
  params.q_batch = p.q_batch, params.q_token = p.q_token, params.q_head = p.q_head;
  params.o_batch = p.o_batch, params.o_token = p.o_token, params.o_head = p.o_head;
  params.k_block = p.k_block, params.k_token = p.k_token, params.k_head = p.k_head;
  params.v_block = p.v_block, params.v_token = p.v_token, params.v_head = p.v_head;
  params.ks_block = p.k_scale.block, params.ks_token = p.k_scale.token, params.ks_head = p.k_scale.head;
  params.vs_block = p.v_scale.block, params.vs_token = p.v_scale.token, params.vs_head = p.v_scale.head;
  params.max_blocks_per_seq = p.max_blocks_per_seq;
  params.block_size = int32_t(p.block_size);
  params.Tq = int32_t(p.Tq);
  params.group = int32_t(p.group());
  params.rows = int32_t(rows);
  params.D = int32_t(p.D);
  params.causal = p.opts.causal ? 1 : 0;
  // A window wider than every sequence masks nothing; clamping keeps it an int without changing the result.
  params.window = int32_t(std::min(p.opts.window, longest + 1));
  params.out_type = p.o_dtype == DType::f32 ? OutType::f32 : p.o_dtype == DType::bf16 ? OutType::bf16 : OutType::f16;
  params.scale_log2 = p.scale * kLog2e;
  params.softcap_log2 = p.opts.softcap > 0.f ? p.opts.softcap * kLog2e : 0.f;
  params.scale_over_softcap = p.opts.softcap > 0.f ? p.scale / p.opts.softcap : 0.f;
  return plan;
}

DecodeParams bind_device_buffer(const DecodeLaunchPlan& plan, unsigned char* device) {
  return bind_device_buffers(plan, device, device + plan.metadata.size());
}

DecodeParams bind_device_buffers(const DecodeLaunchPlan& plan, unsigned char* metadata, unsigned char* partials) {
  DecodeParams params = plan.params;
  params.work = reinterpret_cast<const WorkItem*>(metadata);
  params.merges = reinterpret_cast<const MergeItem*>(metadata + plan.merges_at);
  params.block_table = plan.has_table ? reinterpret_cast<const int32_t*>(metadata + plan.table_at) : nullptr;
  params.sinks = plan.has_sinks ? reinterpret_cast<const float*>(metadata + plan.sinks_at) : nullptr;
  params.alibi_slopes = plan.has_slopes ? reinterpret_cast<const float*>(metadata + plan.slopes_at) : nullptr;
  // The partial results follow the metadata in plan.device_bytes (part_m_at is its end).
  const size_t at = plan.metadata.size();
  params.part_m = reinterpret_cast<float*>(partials + (plan.part_m_at - at));
  params.part_l = reinterpret_cast<float*>(partials + (plan.part_l_at - at));
  params.part_o = reinterpret_cast<float*>(partials + (plan.part_o_at - at));
  return params;
}

DecodeTensors decode_tensors(const DecodeProblem& p) {
  return {p.q, p.o, p.k, p.v, p.k_scale.data, p.v_scale.data};
}

DecodeParams with_tensors(DecodeParams params, const DecodeTensors& t) {
  params.q = t.q;
  params.o = t.o;
  params.k = t.k;
  params.v = t.v;
  params.k_scale = t.k_scale;
  params.v_scale = t.v_scale;
  return params;
}

}  // namespace cuda_decode

// Declared in decode_cuda.h; defined here, with the rest of the host side, so that it exists in every build.
void check_cuda_decode(const DecodeProblem& p) {
  if (!is_half(p.q_dtype))
    throw DTypeError(std::string("q: CUDA decode takes bfloat16 or float16, got ") + dtype_name(p.q_dtype));
  if (p.o_dtype != DType::f32 && !is_half(p.o_dtype))
    throw DTypeError(std::string("out: CUDA decode writes float32, bfloat16 or float16, got ") +
                     dtype_name(p.o_dtype));
  if (!is_half(p.kv_dtype) && !is_quantized_kv(p.kv_dtype))
    throw DTypeError(std::string("k_cache: CUDA decode reads bfloat16, float16, int8 or float8_e4m3fn caches, got ") +
                     dtype_name(p.kv_dtype));
  if (is_half(p.kv_dtype) && p.kv_dtype != p.q_dtype)
    throw DTypeError(std::string("k_cache: dtype ") + dtype_name(p.kv_dtype) + " differs from q's " +
                     dtype_name(p.q_dtype) + " (CUDA decode needs them equal, or an int8 / float8_e4m3fn cache)");
  require(p.D == 64 || p.D == 96 || p.D == 128 || p.D == 256, "q",
          [&] { return "head_dim D on CUDA must be 64, 96, 128 or 256, got " + str(p.D); });
  require(p.Dv == p.D, "v_cache",
          [&] { return "head_dim " + str(p.Dv) + " must equal q's " + str(p.D) + " on CUDA"; });
  require(p.opts.block_mask == nullptr, "block_mask", "not supported on CUDA yet");
  // The merge launches one CTA row per query row (grid y); positions and block rows are int32 in the kernel.
  require(p.rows() <= 65535, "q", [&] {
    return "at most 65535 query rows per kv head (new_tokens x heads per kv head) on CUDA, got " + str(p.rows());
  });
  require(p.block_size <= (int64_t(1) << 30), "k_cache",
          [&] { return "at most 2^30 rows per block (or per sequence) on CUDA, got " + str(p.block_size); });

  check_rows("q", p.q, p.q_dtype,
             {{p.q_batch, p.B > 1, "batch"}, {p.q_token, p.Tq > 1, "token"}, {p.q_head, p.Hq > 1, "head"}});
  check_rows("out", p.o, p.o_dtype,
             {{p.o_batch, p.B > 1, "batch"}, {p.o_token, p.Tq > 1, "token"}, {p.o_head, p.Hq > 1, "head"}});
  const bool many_blocks = p.block_table != nullptr || p.B > 1;
  check_rows("k_cache", p.k, p.kv_dtype,
             {{p.k_block, many_blocks, "block"}, {p.k_token, p.block_size > 1, "token"}, {p.k_head, p.Hkv > 1, "head"}});
  check_rows("v_cache", p.v, p.kv_dtype,
             {{p.v_block, many_blocks, "block"}, {p.v_token, p.block_size > 1, "token"}, {p.v_head, p.Hkv > 1, "head"}});
  if (p.k_scale.data)
    require(reinterpret_cast<uintptr_t>(p.k_scale.data) % 4 == 0, "k_scale", "data must be 4-byte aligned");
  if (p.v_scale.data)
    require(reinterpret_cast<uintptr_t>(p.v_scale.data) % 4 == 0, "v_scale", "data must be 4-byte aligned");
}

}  // namespace attnzoo
