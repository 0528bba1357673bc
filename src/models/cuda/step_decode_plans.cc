#include "models/cuda/step_decode_plans.h"

#include <cstring>

#include "core/error.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {
size_t align16(size_t n) { return (n + 15) / 16 * 16; }
}  // namespace

void StepDecodePlans::add(const DecodePlanKey& key, PreparedDecodeCuda prepared) {
  require(!bound_, "decode plans", "added after the step's upload (add_late)");
  Plan p{key, std::move(prepared), align16(end_), nullptr, nullptr};
  end_ = p.meta_at + p.prepared.plan.metadata.size();
  plans_.push_back(std::move(p));
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
  for (const auto& [at, bytes] : extra_)
    if (!bytes.empty()) std::memcpy(staging.data() + at, bytes.data(), bytes.size());
}

void StepDecodePlans::bind(const uint8_t* meta, DeviceWorkspace& workspace) {
  meta_ = meta;
  for (size_t i = 0; i < plans_.size(); ++i) {
    Plan& p = plans_[i];
    p.metadata = meta + p.meta_at;
    p.partials = static_cast<unsigned char*>(workspace.get(kFirstSlot + i, p.prepared.partial_bytes()));
  }
  bound_ = true;
}

const StepDecodePlans::Plan& StepDecodePlans::add_late(const DecodePlanKey& key, PreparedDecodeCuda prepared,
                                                       const DeviceStep& step) {
  const size_t i = plans_.size();
  Plan p{key, std::move(prepared), 0, nullptr, nullptr};
  const cuda_decode::DecodeLaunchPlan& plan = p.prepared.plan;
  // One slot: the metadata, then the partials, as the plan lays out plan.device_bytes.
  auto* buffer = static_cast<unsigned char*>(step.workspace->get(kFirstSlot + i, plan.device_bytes));
  // From pageable memory: returns once staged, and the plan keeps its bytes for the step anyway.
  copy_bytes(buffer, step.device, plan.metadata.data(), Device::cpu(), plan.metadata.size(), step.stream);
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
