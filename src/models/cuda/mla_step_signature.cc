#include "models/cuda/mla_step_signature.h"

#include <cstring>

namespace attnzoo {

void append_mla_launch_signature(const cuda_mla::MlaLaunchPlan& l, std::vector<uint64_t>& sig) {
  uint32_t scale = 0;
  std::memcpy(&scale, &l.params.scale_log2, sizeof scale);
  const cuda_mla::MlaDecodeParams& p = l.params;
  // The pointers are left out: bind_device_buffers and with_tensors set them at launch from the step's buffers,
  // whose addresses the runner's signature holds.
  for (uint64_t v :
       {uint64_t(l.work.size()), uint64_t(l.merges.size()), uint64_t(l.num_slots), uint64_t(l.head_groups),
        uint64_t(l.batch_groups), uint64_t(l.metadata.size()), uint64_t(l.device_bytes), uint64_t(l.merges_at),
        uint64_t(l.table_at), uint64_t(l.q_lat_at), uint64_t(l.ctx_at), uint64_t(l.part_o_at), uint64_t(l.part_m_at),
        uint64_t(l.part_l_at), uint64_t(l.has_table), uint64_t(l.tensor_cores), uint64_t(p.q_type),
        uint64_t(p.o_type), uint64_t(p.w_type), uint64_t(p.latent_type), uint64_t(p.q_batch), uint64_t(p.q_head),
        uint64_t(p.o_batch), uint64_t(p.o_head), uint64_t(p.w_row), uint64_t(p.latent_block),
        uint64_t(p.latent_token), uint64_t(p.B), uint64_t(p.H), uint64_t(p.dn), uint64_t(p.dr), uint64_t(p.dv),
        uint64_t(p.r), uint64_t(p.block_size), uint64_t(p.max_blocks_per_seq), uint64_t(scale)})
    sig.push_back(v);
}

}  // namespace attnzoo
