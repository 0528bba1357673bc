#include "models/cuda/step_decode_plans.h"

#include <atomic>
#include <cstring>

#include "core/error.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {
size_t align16(size_t n) { return (n + 15) / 16 * 16; }
std::atomic<int64_t> late_copies{0};

// Metadata copied on its own into a workspace slot of `bytes` (its first metadata.size() bytes the copy): from
// pageable memory, so the copy returns once staged, and the plan keeps its bytes for the step anyway.
unsigned char* copy_late(const std::vector<unsigned char>& metadata, size_t bytes, size_t slot, const DeviceStep& step) {
  auto* buffer = static_cast<unsigned char*>(step.workspace->get(slot, bytes));
  copy_bytes(buffer, step.device, metadata.data(), Device::cpu(), metadata.size(), step.stream);
  late_copies.fetch_add(1, std::memory_order_relaxed);
  return buffer;
}
}  // namespace

PrefillPlanKey prefill_plan_key(int64_t call, const AttentionProblem& p) {
  PrefillPlanKey key;
  key.call = call;
  key.Hq = p.Hq, key.Hkv = p.Hkv, key.D = p.D, key.window = p.opts.window;
  key.scale = p.scale, key.softcap = p.opts.softcap, key.sinks = p.opts.sinks;
  key.q_dtype = p.q_dtype, key.o_dtype = p.o_dtype;
  key.strides = {p.qs.token, p.qs.head, p.ks.token, p.ks.head, p.vs.token, p.vs.head, p.os.token, p.os.head};
  return key;
}

int64_t step_plan_late_copies_total() { return late_copies.load(std::memory_order_relaxed); }

void StepDecodePlans::add(const DecodePlanKey& key, PreparedDecodeCuda prepared) {
  require(!bound_, "decode plans", "added after the step's upload (add_late)");
  Plan p{key, std::move(prepared), align16(end_), nullptr, nullptr, next_slot_++};
  end_ = p.meta_at + p.prepared.plan.metadata.size();
  plans_.push_back(std::move(p));
}

void StepDecodePlans::prepare_prefill(int64_t call, const AttentionProblem& p, PreparePrefill prepare) {
  require(!bound_, "prefill plans", "prepared after the step's upload (prefill_plan copies them late)");
  const PrefillPlanKey key = prefill_plan_key(call, p);
  if (find_prefill(key)) return;
  PrefillPlan plan{key, prepare(p), align16(end_), nullptr};
  end_ = plan.meta_at + plan.prepared.launch.metadata.size();
  prefills_.push_back(std::move(plan));
}

const StepDecodePlans::PrefillPlan& StepDecodePlans::prefill_plan(int64_t call, const AttentionProblem& p,
                                                                  const DeviceStep& step, PreparePrefill prepare) {
  const PrefillPlanKey key = prefill_plan_key(call, p);
  if (const PrefillPlan* found = find_prefill(key)) return *found;
  PrefillPlan plan{key, prepare(p), 0, nullptr};
  const std::vector<unsigned char>& metadata = plan.prepared.launch.metadata;
  if (!metadata.empty()) plan.metadata = copy_late(metadata, metadata.size(), next_slot_++, step);
  prefills_.push_back(std::move(plan));
  return prefills_.back();
}

size_t StepDecodePlans::add_bytes(std::span<const uint8_t> bytes) {
  require(!bound_, "decode plans", "bytes added after the step's upload");
  const size_t at = (end_ + 255) / 256 * 256;
  end_ = at + bytes.size();
  extra_.emplace_back(at, std::vector<uint8_t>(bytes.begin(), bytes.end()));
  return at;
}

void StepDecodePlans::pack(std::vector<uint8_t>& staging) const {
  require(staging.size() >= end_, "staging", "holds fewer bytes than the step's decode plans end at");
  for (const Plan& p : plans_)
    std::memcpy(staging.data() + p.meta_at, p.prepared.plan.metadata.data(), p.prepared.plan.metadata.size());
  for (const PrefillPlan& p : prefills_)
    if (!p.prepared.launch.metadata.empty())
      std::memcpy(staging.data() + p.meta_at, p.prepared.launch.metadata.data(), p.prepared.launch.metadata.size());
  for (const auto& [at, bytes] : extra_)
    if (!bytes.empty()) std::memcpy(staging.data() + at, bytes.data(), bytes.size());
}

void StepDecodePlans::bind(const uint8_t* meta, DeviceWorkspace& workspace) {
  meta_ = meta;
  for (Plan& p : plans_) {
    p.metadata = meta + p.meta_at;
    p.partials = static_cast<unsigned char*>(workspace.get(p.slot, p.prepared.partial_bytes()));
  }
  for (PrefillPlan& p : prefills_) p.metadata = meta + p.meta_at;
  bound_ = true;
}

const StepDecodePlans::Plan& StepDecodePlans::add_late(const DecodePlanKey& key, PreparedDecodeCuda prepared,
                                                       const DeviceStep& step) {
  Plan p{key, std::move(prepared), 0, nullptr, nullptr, next_slot_++};
  const cuda_decode::DecodeLaunchPlan& plan = p.prepared.plan;
  // One slot: the metadata, then the partials, as the plan lays out plan.device_bytes.
  unsigned char* buffer = copy_late(plan.metadata, plan.device_bytes, p.slot, step);
  p.metadata = buffer;
  p.partials = buffer + plan.metadata.size();
  plans_.push_back(std::move(p));
  return plans_.back();
}

void StepDecodePlans::append_signature(std::vector<uint64_t>& sig) const {
  auto bits = [](float f) {
    uint32_t u = 0;
    std::memcpy(&u, &f, sizeof u);
    return uint64_t(u);
  };
  sig.push_back(plans_.size());
  for (const Plan& p : plans_) {
    const cuda_decode::DecodeLaunchPlan& l = p.prepared.plan;
    const cuda_decode::DecodeParams& q = l.params;
    for (uint64_t v : {uint64_t(reinterpret_cast<uintptr_t>(p.metadata)), uint64_t(reinterpret_cast<uintptr_t>(p.partials)),
                       uint64_t(reinterpret_cast<uintptr_t>(p.prepared.kernel)), uint64_t(p.prepared.smem_bytes),
                       uint64_t(l.work.size()), uint64_t(l.merges.size()), uint64_t(l.row_groups), uint64_t(l.num_slots),
                       uint64_t(l.metadata.size()), uint64_t(l.device_bytes), uint64_t(l.merges_at), uint64_t(l.table_at),
                       uint64_t(l.sinks_at), uint64_t(l.slopes_at), uint64_t(l.part_m_at), uint64_t(l.part_l_at),
                       uint64_t(l.part_o_at), uint64_t(l.has_table), uint64_t(l.has_sinks), uint64_t(l.has_slopes),
                       uint64_t(q.q_batch), uint64_t(q.q_token), uint64_t(q.q_head), uint64_t(q.o_batch),
                       uint64_t(q.o_token), uint64_t(q.o_head), uint64_t(q.k_block), uint64_t(q.k_token),
                       uint64_t(q.k_head), uint64_t(q.v_block), uint64_t(q.v_token), uint64_t(q.v_head),
                       uint64_t(q.ks_block), uint64_t(q.ks_token), uint64_t(q.ks_head), uint64_t(q.vs_block),
                       uint64_t(q.vs_token), uint64_t(q.vs_head), uint64_t(q.max_blocks_per_seq),
                       uint64_t(q.block_size), uint64_t(q.Tq), uint64_t(q.group), uint64_t(q.rows), uint64_t(q.D),
                       uint64_t(q.causal), uint64_t(q.window), uint64_t(q.out_type), bits(q.scale_log2),
                       bits(q.softcap_log2), bits(q.scale_over_softcap)})
      sig.push_back(v);
  }
  sig.insert(sig.end(), mla_signature.begin(), mla_signature.end());
}
#endif

}  // namespace attnzoo
