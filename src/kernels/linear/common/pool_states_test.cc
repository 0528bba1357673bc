// ssm::require_pool_states, the one check every family runs on states addressed in a pool (ssm_state_indices,
// state_batch_indices, conv_state_indices): what it accepts (a slab whose slots sit further apart than a state,
// a dimension left to the tensor) and what it refuses, each refusal starting with the argument's name. Only shapes
// and addresses are read, so host buffers labelled as device memory stand in for a GPU's.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kernels/linear/common/ssm_args.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using ssm::PoolStates;
using ssm::require_pool_states;
using testing::expect_refusal;

const Device kGpu = Device::cuda();

// [slots, 2, 3, 4] f32 with slots `stride` floats apart, labelled as living on the GPU.
TensorView pool_view(std::vector<float>& slab, int64_t slots, int64_t stride) {
  TensorView t = TensorView::contiguous(slab.data(), DType::f32, {slots, 2, 3, 4});
  t.strides[0] = stride;
  t.device = kGpu;
  return t;
}

TEST(PoolStates, AcceptsSlotsApartAndReturnsTheirBaseAndStride) {
  std::vector<float> slab(5 * 30);
  const TensorView s = pool_view(slab, 5, 30);
  const PoolStates p = require_pool_states(s, s, "ssm_state_indices", kGpu, {{2, "HV"}, {3, "K"}, {4, "V"}});
  EXPECT_EQ(p.base, slab.data());
  EXPECT_EQ(p.row_stride, 30);
  // A dimension the family reads from the tensor (Mamba-1's N, the conv's width).
  EXPECT_EQ(require_pool_states(s, s, "state_batch_indices", kGpu, {{2, "H"}, {-1, "P"}, {4, "N"}}, "state", "state")
                .row_stride,
            30);
}

TEST(PoolStates, RefusesByName) {
  std::vector<float> slab(5 * 30), other(5 * 30);
  const TensorView s = pool_view(slab, 5, 30);
  auto check = [](const TensorView& init, const TensorView& fin, Device device) {
    require_pool_states(init, fin, "ssm_state_indices", device, {{2, "HV"}, {3, "K"}, {4, "V"}});
  };
  // The CPU entries take dense states.
  expect_refusal([&] { check(s, s, Device::cpu()); }, "ssm_state_indices: addresses device states only");
  // One tensor, updated in place.
  expect_refusal([&] { check(s, pool_view(other, 5, 30), kGpu); }, "final_state: with ssm_state_indices must be");
  expect_refusal([&] { check(s, TensorView{}, kGpu); }, "final_state: with ssm_state_indices must be");
  TensorView wrong = s;
  wrong.device = Device::cuda(1);
  expect_refusal([&] { check(wrong, wrong, kGpu); }, "final_state: lives on");
  wrong = s;
  wrong.dtype = DType::bf16;
  expect_refusal([&] { check(wrong, wrong, kGpu); }, "final_state: expected float32");
  wrong = TensorView::contiguous(slab.data(), DType::f32, {5, 2, 3, 5});
  wrong.device = kGpu;
  expect_refusal([&] { check(wrong, wrong, kGpu); }, "final_state: expected [slots, 2, 3, 4], got");
  wrong = TensorView::contiguous(slab.data(), DType::f32, {5, 24});
  wrong.device = kGpu;
  expect_refusal([&] { check(wrong, wrong, kGpu); }, "final_state: expected [slots, 2, 3, 4]");
  // Slots closer than a state would overlap; a state must be contiguous within its slot.
  wrong = pool_view(slab, 5, 23);
  expect_refusal([&] { check(wrong, wrong, kGpu); }, "final_state: needs contiguous [HV, K, V] rows");
  wrong = pool_view(slab, 5, 30);
  wrong.strides[2] = 5;
  expect_refusal([&] { check(wrong, wrong, kGpu); }, "final_state: needs contiguous [HV, K, V] rows");
  // The same address seen with another row stride.
  TensorView init = pool_view(slab, 5, 31);
  expect_refusal([&] { check(init, s, kGpu); }, "initial_state: must have final_state's shape and row stride");
  // The single-tensor families name their one argument.
  wrong = pool_view(slab, 5, 23);
  expect_refusal(
      [&] { require_pool_states(wrong, wrong, "conv_state_indices", kGpu, {{2, "D"}, {-1, "S"}}, "conv_state", "conv_state"); },
      "conv_state: expected [slots, 2, S]");
}

}  // namespace
}  // namespace attnzoo
