#pragma once
// An RWKV-7 kernel's packed prefill on states in a pool's slots (ssm_state_indices with cu_seqlens: the GPU
// runner's prefills) against the same kernel on the dense states gathered, for both RWKV-7 kernels (rwkv7_cases.cc,
// rwkv7_chunk_cases.cc).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/linear/rwkv7/rwkv7.h"
#include "kernels/linear/rwkv7/rwkv7_testing.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/gpu_inputs.h"
#include "testing/cuda_emulation/pool_states.h"

namespace attnzoo::cuda_emulation {

// `launch(args)` (a kernel's check, plan and emulated run) on the slots `index` of a slab of `slots` rows (`lead`
// and `trail` spare floats around each state), against `launch` on the dense states gathered with a separate final
// state: the real sequences' output rows and new states bit for bit (only the first read and last write of each
// state moved), the pads' output rows still NaN bytes, every other float of the slab (other slots, the room around
// each state, the pads' slots) unchanged.
template <class Launch>
void check_rwkv7_pool_prefill(const testing::Rwkv7Case& c, const std::vector<int32_t>& index, int64_t slots,
                              int64_t lead, int64_t trail, uint64_t seed, Launch&& launch) {
  SCOPED_TRACE(c.label() + " slots=" + std::to_string(slots));
  const testing::Rwkv7Inputs in(c, seed);
  const int64_t N = c.nseq();
  ASSERT_EQ(size_t(N), index.size());
  const Rwkv7GpuInputs inputs(in);
  const DeviceTensor init = on_device(in.h0);
  const std::vector<int64_t> o_shape{c.B, c.T, c.H, c.V};
  const DeviceTensor o_dense(c.out_dtype, o_shape, 0), s_dense(DType::f32, {N, c.H, c.K, c.V}, 0);
  Rwkv7Args a = inputs.args(c, in, o_dense);
  a.initial_state = on_gpu(init.device_view()), a.final_state = on_gpu(s_dense.device_view());
  launch(a);

  Pool pool(slots, lead, c.H * c.K * c.V, trail, seed + 100);
  const TensorView states = pool_view(pool, index, in.h0.view.data, {c.H, c.K, c.V});
  const Indices idx(index);
  const DeviceTensor o(c.out_dtype, o_shape, 0);
  a = inputs.args(c, in, o);
  a.initial_state = a.final_state = states, a.ssm_state_indices = idx.data();
  launch(a);

  expect_sequence_rows(index, c.cu_seqlens, o, o_dense, c.H * c.V);
  pool.expect(index, reinterpret_cast<const float*>(s_dense.device.data()), 0.0);
}

}  // namespace attnzoo::cuda_emulation
