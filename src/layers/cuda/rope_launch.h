#pragma once
// The RoPE kernel's launch, decided on the host: head addressing, the access width and the shared memory for tensors
// check_rope_cuda accepts. Plain C++: rope.cu fills the kernel's parameters from it and launches; the kernel
// emulator (testing/cuda_emulation) runs the same plan through the same kernel code (rope_kernel.cuh).
#include <cstddef>
#include <cstdint>

#include "core/tensor.h"
#include "layers/rope.h"

namespace attnzoo::cuda_step {

constexpr int kRopeThreads = 128;

struct HeadsMap {
  int64_t heads = 0, token_stride = 0, head_stride = 0;
};

struct RopeLaunch {
  HeadsMap q_map, k_map;  // k_map empty without k
  int half = 0;           // rotary_dim / 2
  float scale = 1.f;      // the rope's attention factor on cos / sin
  bool interleaved = false;
  bool vectorized = false;  // units of 16 bytes (16 / sizeof(T) elements), else scalar ones
  size_t smem_bytes = 0;    // the per-token cos / sin table
};

// For q (and k unless empty) [tokens, heads, head_dim] with at least one token and rotary_dim > 0.
RopeLaunch plan_rope(const Rope& rope, const TensorView& q, const TensorView& k);

}  // namespace attnzoo::cuda_step
