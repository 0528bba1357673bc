#include "kernels/softmax/cuda/prefill_launch_plan.h"

#include <algorithm>
#include <cstring>

namespace attnzoo::cuda_prefill {
namespace {
size_t align16(size_t n) { return (n + 15) / 16 * 16; }
}  // namespace

PrefillLaunchPlan plan_prefill_launch(const AttentionProblem& p) {
  constexpr int64_t Br = kQueryTile;
  const int64_t Bc = p.D <= 128 ? TileShape<64>::kBc : TileShape<256>::kBc;

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

}  // namespace attnzoo::cuda_prefill
