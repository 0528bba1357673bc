#pragma once
// The emulated twin of cuda_linear::launch_with_offsets (packed_offsets_upload.cuh): a launch over packed
// sequences gets their offsets in an emulated device allocation that lives through the launch; null when there
// are none. And the one-kernel plans' launch on it (the recurrences' and the selective scan's *_stages.h).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "testing/cuda_emulation/cta.h"

namespace attnzoo::cuda_emulation {

template <class Launch>
void launch_with_offsets(const std::vector<int64_t>& offsets, const int64_t** slot, Launch&& launch) {
  if (offsets.empty()) {
    *slot = nullptr;
    return launch();
  }
  DeviceMemory memory(offsets.size() * sizeof(int64_t));
  std::memcpy(memory.data(), offsets.data(), memory.size());
  *slot = reinterpret_cast<const int64_t*>(memory.data());
  launch();
}

// One-kernel plan `l` (its seq_offsets, grid and threads; l.params.seq_offsets pointed at the offsets' copy):
// `cta` on each CTA with `smem_bytes` of shared memory, the CTAs' schedule from `seed`.
template <class Plan, class Cta>
void launch_packed_plan(Plan& l, size_t smem_bytes, uint64_t seed, Cta&& cta) {
  launch_with_offsets(l.seq_offsets, &l.params.seq_offsets, [&] {
    seed_schedule(seed);
    launch(dim3(l.grid), int(l.threads), smem_bytes, cta);
  });
}

}  // namespace attnzoo::cuda_emulation
