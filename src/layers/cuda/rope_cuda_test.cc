// The CUDA RoPE against Rope::apply (the same f32 angles, so the two differ only in the rotation's own rounding):
// both layouts, partial rotary, the scaled rope types (llama3, yarn with its attention factor), q and k as slices of
// one fused qkv row, int32 and int64 positions up to 10^5, head sizes that do and do not allow 16-byte vectors.
// Refusals are host-only and run without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/cuda/rope_cuda.h"
#include "layers/cuda/step_test_util.h"
#include "layers/rope.h"
#include "testing/step_reference.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::DeviceOperand;
using testing::expect_error;
using testing::fake_cuda_view;
using testing::make_rope;
using testing::RopeCase;

TEST(RopeCuda, RefusesNamingTheArgument) {
  const Rope rope = make_rope(64, 0, RopeLayout::half);
  const Device gpu = Device::cuda(0);
  const TensorView q = fake_cuda_view(DType::bf16, {3, 8, 64}), k = fake_cuda_view(DType::bf16, {3, 2, 64});
  const TensorView pos = fake_cuda_view(DType::i32, {3});
  EXPECT_NO_THROW(check_rope_cuda(rope, gpu, q, k, pos));
  EXPECT_NO_THROW(check_rope_cuda(rope, gpu, q, TensorView{}, fake_cuda_view(DType::i64, {3})));  // q only

  TensorView host_q = q;
  host_q.device = Device::cpu();
  expect_error<ArgumentError>([&] { check_rope_cuda(rope, gpu, host_q, k, pos); }, "q: lives on cpu");
  expect_error<ArgumentError>([&] { check_rope_cuda(rope, Device::cuda(1), q, k, pos); },
                              "q: lives on cuda:0, the other operands on cuda:1");
  expect_error<ArgumentError>([&] { check_rope_cuda(rope, gpu, fake_cuda_view(DType::bf16, {3, 8, 128}), k, pos); },
                              "q: expected [tokens, heads, 64]");
  expect_error<ArgumentError>([&] { check_rope_cuda(rope, gpu, fake_cuda_view(DType::bf16, {3, 512}), k, pos); },
                              "q: expected [tokens, heads, 64]");
  expect_error<DTypeError>([&] { check_rope_cuda(rope, gpu, q, fake_cuda_view(DType::f16, {3, 2, 64}), pos); },
                           "k: dtype float16 differs from q's bfloat16");
  expect_error<ArgumentError>([&] { check_rope_cuda(rope, gpu, q, fake_cuda_view(DType::bf16, {4, 2, 64}), pos); },
                              "k: has 4 tokens, q 3");
  expect_error<DTypeError>([&] { check_rope_cuda(rope, gpu, q, k, fake_cuda_view(DType::f32, {3})); },
                           "positions: must be int32 or int64");
  expect_error<ArgumentError>([&] { check_rope_cuda(rope, gpu, q, k, fake_cuda_view(DType::i32, {2})); },
                              "positions: expected a contiguous [3]");
  TensorView host_pos = pos;
  host_pos.device = Device::cpu();
  expect_error<ArgumentError>([&] { check_rope_cuda(rope, gpu, q, k, host_pos); }, "positions: lives on cpu");
  expect_error<ArgumentError>([&] { check_rope_cuda(Rope(), gpu, q, k, pos); }, "rope: ");
}

#if ATTNZOO_WITH_CUDA

class RopeCudaGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  }
};

void check_rope(const RopeCase& c) {
  SCOPED_TRACE(c.label());
  const Rope rope = make_rope(c.head_dim, c.rotary_dim, c.layout, c.type);
  const int64_t Hq = 6, Hk = 2, D = c.head_dim, row = (Hq + 2 * Hk) * D + c.token_pad;
  DeviceOperand qkv(c.dtype, {c.tokens, row}, 1);
  std::vector<int32_t> pos(size_t(c.tokens));
  for (int64_t t = 0; t < c.tokens; ++t) pos[size_t(t)] = int32_t((t * 15485863) % 100000);  // scattered, to 10^5
  std::vector<int64_t> pos64(pos.begin(), pos.end());
  DeviceBuffer pos_dev(Device::cuda(), pos64.size() * sizeof(int64_t));
  pos_dev.upload(c.int64_positions ? static_cast<const void*>(pos64.data()) : pos.data(),
                 pos.size() * (c.int64_positions ? sizeof(int64_t) : sizeof(int32_t)));
  TensorView positions = TensorView::contiguous(pos_dev.data(), c.int64_positions ? DType::i64 : DType::i32, {c.tokens});
  positions.device = Device::cuda();

  const std::vector<float> want = testing::rope_fused_reference(
      rope, [&](int64_t i) { return qkv.at(i); }, c.tokens, Hq, Hk, D, row, pos.data());
  const testing::FusedQk views = testing::fused_qk_views(qkv.device_view(), c.tokens, Hq, Hk, D, row, c.dtype);
  const TensorView& q = views.q;
  const TensorView& k = views.k;
  const RopeCuda gpu(rope, Device::cuda());
  gpu.apply(q, k, positions);
  qkv.download();
  synchronize(current_stream());

  // Same cos / sin bits (f32 angle, double sincos); the rotation a c - b s may be contracted to an FMA on either
  // side: a few ulp of |a| + |b| <= ~10, so 4e-6 in f32, plus one ulp of the output dtype.
  double worst = 0;
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t i = 0; i < row; ++i) {
      const int64_t o = t * row + i;
      const int64_t channel = i % D;
      const bool rotated = i < (Hq + Hk) * D && channel < rope.rotary_dim();
      if (!rotated) {
        ASSERT_EQ(qkv.at(o), want[size_t(o)]) << "token " << t << " element " << i << " must not change";
        continue;
      }
      const double tol = testing::output_tolerance(c.dtype, want[size_t(o)], 0, 4e-6);
      worst = std::max(worst, std::fabs(qkv.at(o) - want[size_t(o)]) / tol);
    }
  EXPECT_LE(worst, 1.0);
}

TEST_F(RopeCudaGpu, MatchesRopeApply) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (RopeLayout layout : {RopeLayout::half, RopeLayout::interleaved}) {
      check_rope({dt, 128, 0, layout});                            // full rotary, vectors
      check_rope({dt, 128, 64, layout, "default", 3, true});       // partial rotary (Phi / GLM), int64 positions
      check_rope({dt, 80, 40, layout, "default", 5, false, 0});    // half = 20: no whole bf16 vector, scalar
      check_rope({dt, 64, 0, layout, "default", 4, false, 2});     // unaligned token stride: scalar
      check_rope({dt, 128, 0, layout, "llama3", 9});               // banded scaling
      check_rope({dt, 64, 0, layout, "yarn", 2});                  // attention factor on cos / sin
    }
}

TEST_F(RopeCudaGpu, NoPeLeavesEverythingAlone) {
  RopeConfig c;
  c.head_dim = 64;
  c.type = "none";
  const RopeCuda gpu(Rope(c), Device::cuda());
  DeviceOperand q(DType::bf16, {2, 4, 64}, 1);
  const std::vector<uint8_t> before = q.host;
  DeviceBuffer pos(Device::cuda(), 2 * sizeof(int32_t));
  TensorView positions = TensorView::contiguous(pos.data(), DType::i32, {2});
  positions.device = Device::cuda();
  gpu.apply(q.device_view(), TensorView{}, positions);
  q.download();
  synchronize(current_stream());
  EXPECT_EQ(q.host, before);
}

#endif  // ATTNZOO_WITH_CUDA

}  // namespace
}  // namespace attnzoo
