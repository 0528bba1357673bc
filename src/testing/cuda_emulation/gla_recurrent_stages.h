#pragma once
// gla_recurrent.cu's launch on the emulator: the host metadata it uploads (packed sequences' offsets, a host
// g_gamma's decays) in emulated allocations that live through the launch, then the kernel for the plan's gate.
// For the gated linear family's own cases and the pool-state decode steps.
#include <cstdint>
#include <cstring>
#include <optional>

#include "kernels/linear/common/cuda/gla_recurrent_kernel.cuh"
#include "kernels/linear/common/cuda/gla_recurrent_launch.h"
#include "kernels/linear/common/gla_problem.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/packed_offsets.h"

namespace attnzoo::cuda_emulation {

inline void run_gla_recurrent(cuda_gla::RecurrentLaunch& l, uint64_t seed) {
  std::optional<DeviceMemory> gamma;
  if (!l.gamma.empty()) {
    gamma.emplace(l.gamma.size() * sizeof(float));
    std::memcpy(gamma->data(), l.gamma.data(), gamma->size());
    l.params.g_gamma = reinterpret_cast<const float*>(gamma->data());
  }
  launch_packed_plan(l, 0, seed, [&](unsigned char*) {
    switch (l.gate) {
      case GateKind::none: cuda_gla::gla_recurrent_cta<GateKind::none>(l.params); break;
      case GateKind::scalar: cuda_gla::gla_recurrent_cta<GateKind::scalar>(l.params); break;
      case GateKind::channel: cuda_gla::gla_recurrent_cta<GateKind::channel>(l.params); break;
    }
  });
}

}  // namespace attnzoo::cuda_emulation
