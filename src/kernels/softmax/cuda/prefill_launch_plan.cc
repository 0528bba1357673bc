#include "kernels/softmax/cuda/prefill_launch_plan.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/softmax/cuda/prefill_cuda.h"

namespace attnzoo {
namespace {
std::string str(int64_t v) { return std::to_string(v); }

bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }

// 16-byte cp.async loads and paired stores need every row start 16-byte aligned: the base, every sequence's
// offset and both strides (head stride only when there is more than one head to step over).
void check_alignment(const char* name, const void* base, TokenStrides st, int64_t heads,
                     const std::vector<int64_t>& offsets) {
  require(reinterpret_cast<uintptr_t>(base) % 16 == 0, name, "data must be 16-byte aligned on CUDA");
  require(st.token % 8 == 0 && (heads == 1 || st.head % 8 == 0), name, [&] {
    return "token and head strides must be multiples of 8 elements on CUDA (16-byte loads), got token stride " +
           str(st.token) + ", head stride " + str(st.head);
  });
  for (int64_t off : offsets)
    require(off % 8 == 0, name, [&] {
      return "every sequence must start at a multiple of 8 elements on CUDA (batch stride), got offset " + str(off);
    });
}
}  // namespace

namespace cuda_prefill {
namespace {
size_t align16(size_t n) { return (n + 15) / 16 * 16; }
}  // namespace

PrefillLaunchPlan plan_prefill_launch(const AttentionProblem& p, int64_t query_tile, int64_t key_tile) {
  const int64_t Br = query_tile;
  const int64_t Bc = key_tile > 0 ? key_tile : p.D <= 128 ? TileShape<64>::kBc : TileShape<256>::kBc;

  // The work list: every sequence's query tiles, costliest first (most key tiles under the causal / window
  // band), so the long CTAs start early and the short ones fill the tail.
  std::vector<SeqDesc> seqs;
  std::vector<WorkItem> work;
  std::vector<int64_t> cost;
  int64_t max_tk = 0;
  for (const SeqSpan& s : p.seqs) {
    const int32_t index = int32_t(seqs.size());
    seqs.push_back({s.q_offset, s.k_offset, s.v_offset, s.o_offset, int32_t(s.Tq), int32_t(s.Tk)});
    max_tk = std::max(max_tk, s.Tk);
    for (int64_t start = 0; start < s.Tq; start += Br) {
      const int64_t last = s.Tk - s.Tq + std::min(start + Br, s.Tq) - 1;
      const int64_t keys = p.opts.causal ? last + 1 : s.Tk;
      const int64_t first = p.opts.window > 0 ? std::max<int64_t>(0, s.Tk - s.Tq + start - p.opts.window + 1) : 0;
      work.push_back({index, int32_t(start)});
      cost.push_back((keys + Bc - 1) / Bc - first / Bc);
    }
  }
  PrefillLaunchPlan plan;
  if (work.empty()) return plan;
  std::vector<size_t> order(work.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<WorkItem> sorted;
  sorted.reserve(work.size());
  for (size_t i : order) sorted.push_back(work[i]);

  const size_t seqs_bytes = seqs.size() * sizeof(SeqDesc), work_bytes = sorted.size() * sizeof(WorkItem);
  const size_t head_bytes = size_t(p.Hq) * sizeof(float);
  plan.work_at = align16(seqs_bytes);
  plan.sinks_at = align16(plan.work_at + work_bytes);
  plan.slopes_at = align16(plan.sinks_at + (p.opts.sinks ? head_bytes : 0));
  plan.metadata.resize(plan.slopes_at + (p.opts.alibi_slopes ? head_bytes : 0));
  unsigned char* host = plan.metadata.data();
  std::memcpy(host, seqs.data(), seqs_bytes);
  std::memcpy(host + plan.work_at, sorted.data(), work_bytes);
  if (p.opts.sinks) std::memcpy(host + plan.sinks_at, p.opts.sinks, head_bytes);
  if (p.opts.alibi_slopes) std::memcpy(host + plan.slopes_at, p.opts.alibi_slopes, head_bytes);
  plan.work_items = unsigned(sorted.size());
  plan.has_sinks = p.opts.sinks != nullptr;
  plan.has_slopes = p.opts.alibi_slopes != nullptr;

  PrefillParams& params = plan.params;
  params.q = p.q;
  params.k = p.k;
  params.v = p.v;
  params.o = p.o;
  params.q_token = p.qs.token, params.q_head = p.qs.head;
  params.k_token = p.ks.token, params.k_head = p.ks.head;
  params.v_token = p.vs.token, params.v_head = p.vs.head;
  params.o_token = p.os.token, params.o_head = p.os.head;
  params.group = int(p.group());
  params.causal = p.opts.causal ? 1 : 0;
  // A window wider than every sequence masks nothing; clamping keeps it an int without changing the result.
  params.window = int(std::min(p.opts.window, max_tk + 1));
  params.out_type = p.o_dtype == DType::f32 ? OutType::f32 : p.o_dtype == DType::bf16 ? OutType::bf16 : OutType::f16;
  params.scale_log2 = p.scale * kLog2e;
  params.softcap = p.opts.softcap;
  params.softcap_log2 = p.opts.softcap * kLog2e;
  params.scale_over_softcap = p.opts.softcap > 0.f ? p.scale / p.opts.softcap : 0.f;
  return plan;
}

PrefillParams bind_metadata(const PrefillLaunchPlan& plan, const unsigned char* metadata) {
  PrefillParams params = plan.params;
  params.seqs = reinterpret_cast<const SeqDesc*>(metadata);
  params.work = reinterpret_cast<const WorkItem*>(metadata + plan.work_at);
  params.sinks = plan.has_sinks ? reinterpret_cast<const float*>(metadata + plan.sinks_at) : nullptr;
  params.alibi_slopes = plan.has_slopes ? reinterpret_cast<const float*>(metadata + plan.slopes_at) : nullptr;
  return params;
}

}  // namespace cuda_prefill

// Declared in prefill_cuda.h; defined here, with the rest of the host side, so that it exists in every build.
void check_cuda_prefill(const AttentionProblem& p) {
  if (!is_half(p.q_dtype))
    throw DTypeError(std::string("q: CUDA prefill takes bfloat16 or float16, got ") + dtype_name(p.q_dtype));
  if (p.kv_dtype != p.q_dtype)
    throw DTypeError(std::string("k: dtype ") + dtype_name(p.kv_dtype) + " differs from q's " +
                     dtype_name(p.q_dtype) + " (CUDA prefill needs them equal)");
  if (p.o_dtype != DType::f32 && !is_half(p.o_dtype))
    throw DTypeError(std::string("out: CUDA prefill writes float32, bfloat16 or float16, got ") +
                     dtype_name(p.o_dtype));
  require(p.D == 64 || p.D == 96 || p.D == 128 || p.D == 256, "q",
          [&] { return "head_dim D on CUDA must be 64, 96, 128 or 256, got " + str(p.D); });
  require(p.Dv == p.D, "v", [&] { return "head_dim " + str(p.Dv) + " must equal q's " + str(p.D) + " on CUDA"; });
  require(p.opts.block_mask == nullptr, "block_mask", "not supported on CUDA yet");
  require(p.k_scale.data == nullptr && p.v_scale.data == nullptr, "cache",
          "quantized (int8 / fp8) KV caches are not supported on CUDA yet");
  require(p.Hq <= 65535, "q", [&] { return "at most 65535 heads on CUDA (grid y), got " + str(p.Hq); });

  // Positions are int32 in the kernel; the margin keeps (Tk + Bc - 1) and friends in range.
  constexpr int64_t kMaxTokens = int64_t(1) << 30;
  std::vector<int64_t> q_offsets, k_offsets, v_offsets, o_offsets;
  for (const SeqSpan& s : p.seqs) {
    require(s.blocks == nullptr, "cache", "paged KV caches (block tables) are not supported on CUDA yet");
    require(s.Tk <= kMaxTokens, "k",
            [&] { return "sequences longer than 2^30 keys are not supported, got " + str(s.Tk); });
    if (s.Tq == 0) continue;  // never read
    q_offsets.push_back(s.q_offset);
    k_offsets.push_back(s.k_offset);
    v_offsets.push_back(s.v_offset);
    o_offsets.push_back(s.o_offset);
  }
  if (q_offsets.empty()) return;  // nothing will be launched
  check_alignment("q", p.q, p.qs, p.Hq, q_offsets);
  check_alignment("k", p.k, p.ks, p.Hkv, k_offsets);
  check_alignment("v", p.v, p.vs, p.Hkv, v_offsets);
  check_alignment("out", p.o, p.os, p.Hq, o_offsets);
}

}  // namespace attnzoo
