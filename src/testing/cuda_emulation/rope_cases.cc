// The CUDA RoPE (layers/cuda/rope_kernel.cuh, planned by rope_launch) under the CTA emulator against Rope::apply,
// with the GPU test's comparison (rope_cuda_test.cc: the same f32 angles, so only the rotation's rounding differs):
// both layouts, partial rotary, llama3 and yarn scaling, int32 and int64 positions up to 10^5, q and k with
// different head counts as slices of one fused qkv row, 16-byte and scalar units. Channels past rotary_dim, v and
// the padding after each row must come back unchanged, the bytes after the tensor untouched. The grid is capped at
// three blocks so that the token loop reuses the shared cos / sin table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "layers/cuda/rope_kernel.cuh"
#include "layers/cuda/rope_launch.h"
#include "layers/rope.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/strided_operand.h"
#include "testing/step_reference.h"

namespace attnzoo {
namespace {
using namespace cuda_step;
using cuda_emulation::DeviceMemory;
using cuda_emulation::StridedOperand;
using testing::make_rope;
using testing::RopeCase;

// rope.cu's launch: a block per token (capped here), the plan's access width.
template <class T, class Pos>
void launch_rope(const RopeLaunch& l, const RopeParams<T, Pos>& p) {
  constexpr int V = 16 / sizeof(T);
  const unsigned grid = unsigned(std::min<int64_t>(p.tokens, 3));
  cuda_emulation::launch(dim3(grid), kRopeThreads, l.smem_bytes, [&](unsigned char* smem) {
    float* angles = reinterpret_cast<float*>(smem);
    if (l.interleaved) {
      l.vectorized ? rope_tokens<T, Pos, V, true>(p, angles) : rope_tokens<T, Pos, 1, true>(p, angles);
    } else {
      l.vectorized ? rope_tokens<T, Pos, V, false>(p, angles) : rope_tokens<T, Pos, 1, false>(p, angles);
    }
  });
}

void check_rope(const RopeCase& c, bool expect_vectorized) {
  SCOPED_TRACE(c.label());
  const Rope rope = make_rope(c.head_dim, c.rotary_dim, c.layout, c.type);
  const int64_t Hq = 4, Hk = 2, D = c.head_dim, row = (Hq + 2 * Hk) * D + c.token_pad;
  StridedOperand qkv(c.dtype, {c.tokens, row}, 1 + uint64_t(D));
  std::vector<int32_t> pos(size_t(c.tokens));
  for (int64_t t = 0; t < c.tokens; ++t) pos[size_t(t)] = int32_t((t * 15485863) % 100000);  // scattered, to 10^5
  const std::vector<int64_t> pos64(pos.begin(), pos.end());
  DeviceMemory positions(pos.size() * (c.int64_positions ? sizeof(int64_t) : sizeof(int32_t)));
  std::memcpy(positions.data(), c.int64_positions ? static_cast<const void*>(pos64.data()) : pos.data(),
              positions.size());
  DeviceMemory inv_freq(rope.inv_freq().size() * sizeof(float));
  std::memcpy(inv_freq.data(), rope.inv_freq().data(), inv_freq.size());

  const std::vector<float> want = testing::rope_fused_reference(
      rope, [&](int64_t i) { return qkv.at(i); }, c.tokens, Hq, Hk, D, row, pos.data());
  const testing::FusedQk views = testing::fused_qk_views(qkv.device_view(), c.tokens, Hq, Hk, D, row, c.dtype);
  const TensorView& q = views.q;
  const TensorView& k = views.k;
  const RopeLaunch l = plan_rope(rope, q, k);
  EXPECT_EQ(l.vectorized, expect_vectorized);
  with_float_type(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto pos_tag) {
      using Pos = decltype(pos_tag);
      const RopeParams<T, Pos> p{static_cast<T*>(q.data), static_cast<T*>(k.data), l.q_map, l.k_map,
                                 reinterpret_cast<const Pos*>(positions.data()),
                                 reinterpret_cast<const float*>(inv_freq.data()), c.tokens, l.half, l.scale};
      launch_rope(l, p);
    };
    c.int64_positions ? run(int64_t{}) : run(int32_t{});
  });
  const std::vector<uint8_t> before = qkv.host;
  qkv.download();

  double worst = 0;
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t i = 0; i < row; ++i) {
      const int64_t o = t * row + i;
      const bool rotated = i < (Hq + Hk) * D && i % D < rope.rotary_dim();
      if (!rotated) {
        ASSERT_EQ(qkv.at(o), want[size_t(o)]) << "token " << t << " element " << i << " must not change";
        continue;
      }
      // rope_cuda_test.cc: a few ulp of |a| + |b| in f32 (an FMA on either side), plus one ulp of the dtype.
      worst = std::max(worst, std::fabs(qkv.at(o) - want[size_t(o)]) / testing::output_tolerance(c.dtype, want[size_t(o)], 0, 4e-6));
    }
  EXPECT_LE(worst, 1.0);
  const size_t used = size_t(c.tokens * row) * dtype_size(c.dtype);
  EXPECT_TRUE(std::equal(qkv.host.begin() + used, qkv.host.end(), before.begin() + used)) << "bytes after the rows";
}

TEST(EmulatedRope, MatchesRopeApply) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (RopeLayout layout : {RopeLayout::half, RopeLayout::interleaved}) {
      check_rope({dt, 128, 0, layout}, true);                                 // full rotary, vectors
      check_rope({dt, 128, 64, layout, "default", 3, true}, true);            // partial rotary, int64 positions
      check_rope({dt, 80, 40, layout, "default", 5, false, 0},                // half = 20: no whole vector...
                 dt == DType::f32 || layout == RopeLayout::interleaved);      // ...except f32 / interleaved
      check_rope({dt, 64, 0, layout, "default", 4, false, 2}, false);         // unaligned token stride: scalar
      check_rope({dt, 128, 0, layout, "llama3", 6, true}, true);              // banded scaling
      check_rope({dt, 64, 32, layout, "yarn", 5}, true);                      // attention factor on cos / sin
      check_rope({dt, 96, 0, layout, "default", 5}, true);                    // Phi-3 mini: half = 48, full
      check_rope({dt, 96, 32, layout, "default", 4, true}, true);             // partial rotary at head_dim 96
    }
}

}  // namespace
}  // namespace attnzoo
