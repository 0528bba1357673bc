#include "kernels/softmax/cuda/prefill_sm90_launch_plan.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"

namespace attnzoo::cuda_prefill {
namespace {

// Rows of a TMA map: every sequence's tokens, from its first (offset / token stride) on.
int64_t token_rows(const AttentionProblem& p, int64_t SeqSpan::*offset, int64_t SeqSpan::*length, int64_t token) {
  int64_t rows = 1;
  for (const SeqSpan& s : p.seqs)
    if (s.Tq > 0) rows = std::max(rows, s.*offset / token + s.*length);
  return rows;
}

sm90::TensorMapSpec map_of(const void* base, TokenStrides st, int64_t heads, int64_t D, int64_t rows,
                           uint32_t box_rows) {
  sm90::TensorMapSpec m;
  m.base = base;
  m.rank = 3;
  m.elem_bytes = 2;
  m.dims[0] = uint64_t(D), m.dims[1] = uint64_t(heads), m.dims[2] = uint64_t(rows);
  // One head: its stride is never stepped over and may be anything; the map gets a packed one (a multiple of 16).
  m.strides[1] = uint64_t(heads > 1 ? st.head : D) * 2, m.strides[2] = uint64_t(st.token * 2);
  m.box[0] = 64, m.box[1] = 1, m.box[2] = box_rows;
  return m;
}

}  // namespace

const char* sm90_prefill_gap(const AttentionProblem& p) {
  // Tiles are whole 64-column swizzle boxes; 96 (Phi-3) would need a half box per row, so it runs the sm_80 kernel.
  if (p.D != 64 && p.D != 128 && p.D != 256) return "head_dim D is not 64, 128 or 256";
  for (const SeqSpan& s : p.seqs) {
    if (s.Tq == 0) continue;
    // A sequence's rows are TMA coordinates: it must start at a whole token of each tensor.
    if (p.qs.token <= 0 || p.ks.token <= 0 || p.vs.token <= 0 || s.q_offset % p.qs.token ||
        s.k_offset % p.ks.token || s.v_offset % p.vs.token)
      return "a sequence does not start at a whole token (batch stride not a multiple of the token stride)";
  }
  constexpr int64_t kMaxRows = int64_t(1) << 30;  // int32 coordinates, with a tile's margin
  if (token_rows(p, &SeqSpan::q_offset, &SeqSpan::Tq, std::max<int64_t>(p.qs.token, 1)) > kMaxRows ||
      token_rows(p, &SeqSpan::k_offset, &SeqSpan::Tk, std::max<int64_t>(p.ks.token, 1)) > kMaxRows ||
      token_rows(p, &SeqSpan::v_offset, &SeqSpan::Tk, std::max<int64_t>(p.vs.token, 1)) > kMaxRows)
    return "more than 2^30 token rows";
  int64_t tiles = 0;
  for (const SeqSpan& s : p.seqs) tiles += (s.Tq + kSm90QueryTile - 1) / kSm90QueryTile;
  if (tiles * p.Hq > INT32_MAX) return "more than 2^31 - 1 (query tile, head) items";
  return nullptr;
}

const char* prefill_path_name(PrefillPath path) { return path == PrefillPath::sm90 ? "sm90" : "sm80"; }

PrefillPath choose_prefill_path(const AttentionProblem& p, int sm_major, const char* forced) {
  if (forced && std::strcmp(forced, "sm80") == 0) return PrefillPath::sm80;
  // sm_90a code runs on sm_90 only (the "a" features are not in later architectures).
  return sm_major == 9 && !sm90_prefill_gap(p) ? PrefillPath::sm90 : PrefillPath::sm80;
}

PrefillSchedule choose_prefill_schedule(const char* forced) {
  if (!forced || !*forced || std::strcmp(forced, "static") == 0) return PrefillSchedule::static_stride;
  if (std::strcmp(forced, "dynamic") == 0) return PrefillSchedule::dynamic;
  throw ArgumentError(std::string("ATTNZOO_CUDA_PREFILL_SCHEDULE: must be static or dynamic, got \"") + forced + "\"");
}

const char* prefill_schedule_name(PrefillSchedule schedule) {
  return schedule == PrefillSchedule::dynamic ? "dynamic" : "static";
}

PrefillSm90Plan plan_prefill_sm90(const AttentionProblem& p, int multiprocessors) {
  PrefillSm90Plan plan;
  plan.launch = plan_prefill_launch(p, kSm90QueryTile, sm90_key_tile(p.D));
  if (plan.launch.work_items == 0) return plan;
  // The counters after everything else, 8-byte aligned as the metadata's own records are; zero until a launch.
  plan.schedule_at = (plan.launch.metadata.size() + 7) / 8 * 8;
  plan.launch.metadata.resize(plan.schedule_at + 2 * sizeof(uint32_t), 0);
  plan.items = int32_t(int64_t(plan.launch.work_items) * p.Hq);
  plan.ctas = unsigned(std::min<int64_t>(plan.items, std::max(multiprocessors, 1)));
  plan.q = map_of(p.q, p.qs, p.Hq, p.D, token_rows(p, &SeqSpan::q_offset, &SeqSpan::Tq, p.qs.token), kSm90QueryTile);
  plan.k = map_of(p.k, p.ks, p.Hkv, p.D, token_rows(p, &SeqSpan::k_offset, &SeqSpan::Tk, p.ks.token), uint32_t(sm90_key_tile(p.D)));
  plan.v = map_of(p.v, p.vs, p.Hkv, p.D, token_rows(p, &SeqSpan::v_offset, &SeqSpan::Tk, p.vs.token), uint32_t(sm90_key_tile(p.D)));
  return plan;
}

}  // namespace attnzoo::cuda_prefill
