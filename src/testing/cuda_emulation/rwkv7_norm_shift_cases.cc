// The block LayerNorm fused into RWKV-7's token shift and lerps (layers/cuda/rwkv7_step_kernel.cuh's
// rwkv7_norm_shift_mix: the GPU runner's attn_norm / ffn_norm and the shift in one launch) under the CTA emulator:
// against the CPU layers (layer_norm, then rwkv7_state.h's rwkv7_token_shift and the lerps) within a bf16 rounding,
// and against the two launches it replaces (rwkv7_layer_norm into h, rwkv7_shift_mix of h) bit for bit, the lerps
// and every float of the pool; over a ragged batch on pool slots with one-token and empty sequences and pads, the
// grid capped so its loop takes several rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/convert.h"
#include "layers/batch.h"
#include "layers/cuda/rwkv7_step_kernel.cuh"
#include "layers/layer_norm.h"
#include "layers/rwkv7_state.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/rwkv7_shift_batch.h"
#include "testing/cuda_emulation/strided_operand.h"

namespace attnzoo {
namespace {
using namespace cuda_step;
using cuda_emulation::ShiftBatch;
using cuda_emulation::StridedOperand;
using cuda_emulation::bf16_round;
using cuda_emulation::fill_nan;
using cuda_emulation::values;

// A ragged batch of `lens` sequences at pool slots `slots` (-1: a pad), shift rows `stride` floats apart at
// `offset`; M lerps of C channels; a norm bias or none.
void check_norm_shift(const std::vector<int32_t>& lens, const std::vector<int32_t>& slots, int64_t C, int M,
                      bool bias, int64_t stride, int64_t offset, unsigned blocks) {
  SCOPED_TRACE("C " + std::to_string(C) + " M " + std::to_string(M) + " seqs " + std::to_string(lens.size()) +
               (bias ? " bias" : ""));
  const ShiftBatch sb(lens, slots);
  const int64_t T = sb.T;
  StridedOperand x(DType::f32, {T, C}, 1, {}, 3.f), w(DType::f32, {C}, 2), b(DType::f32, {C}, 3),
      mixes(DType::f32, {int64_t(M), C}, 4), pool(DType::f32, {sb.pool_rows * stride}, 5),
      pool_two(DType::f32, {sb.pool_rows * stride}, 5), h(DType::f32, {T, C}, 6),
      out(DType::bf16, {int64_t(M), T, C}, 7), out_two(DType::bf16, {int64_t(M), T, C}, 7);
  for (int64_t i = 0; i < T * C; ++i) x.set(i, x.at(i) + 4.f);  // a mean far from 0
  x.upload();
  fill_nan(out), fill_nan(out_two);
  const float eps = 1e-5f;

  // The CPU: the LayerNorm, the shift's deltas over a host copy of the pool, the lerps.
  const std::vector<float> xh = values(x), wh = values(w), bh = values(b), mh = values(mixes);
  std::vector<float> hh(size_t(T * C)), pool_h = values(pool);
  layer_norm(xh.data(), T, 1, C, wh.data(), bias ? bh.data() : nullptr, eps, hh.data());
  const std::vector<float> delta = sb.deltas(hh.data(), C, pool_h, stride, offset);

  // Fused.
  const float* bias_d = bias ? b.device_ptr<const float>() : nullptr;
  const Rwkv7NormShiftParams q{{x.device_ptr<const float>(), pool.device_ptr<float>() + offset, stride, sb.slots_d,
                                sb.seq_of, sb.cu, mixes.device_ptr<const float>(), out.device_ptr<__nv_bfloat16>(), T,
                                C, M},
                               w.device_ptr<const float>(), bias_d, eps};
  cuda_emulation::launch(dim3(blocks), kRwkv7Threads, 0, [&](unsigned char*) { rwkv7_norm_shift_mix(q); });
  // The two launches it replaces.
  const Rwkv7NormParams n{x.device_ptr<const float>(), h.device_ptr<float>(), w.device_ptr<const float>(), bias_d, T,
                          1, C, eps};
  cuda_emulation::launch(dim3(blocks), kRwkv7Threads, 0, [&](unsigned char*) { rwkv7_layer_norm(n); });
  const Rwkv7ShiftParams p{h.device_ptr<const float>(), pool_two.device_ptr<float>() + offset, stride, sb.slots_d,
                           sb.seq_of, sb.cu, mixes.device_ptr<const float>(), out_two.device_ptr<__nv_bfloat16>(), T,
                           C, M};
  cuda_emulation::launch(dim3(blocks), kRwkv7Threads, 0, [&](unsigned char*) { rwkv7_shift_mix(p); });
  for (StridedOperand* t : {&out, &out_two, &pool, &pool_two}) t->download();

  int64_t far = 0, differ = 0;
  for (int m = 0; m < M; ++m)
    for (int64_t e = 0; e < T * C; ++e) {
      const int64_t at = m * T * C + e;
      const float want = bf16_round(hh[size_t(e)] + delta[size_t(e)] * mh[size_t(m * C + e % C)]);
      far += !(std::fabs(out.at(at) - want) <= std::fabs(want) * (1.f / 128) + 1e-4f);
      differ += out.at(at) != out_two.at(at);
    }
  EXPECT_EQ(far, 0) << "lerps off the CPU's by more than a bf16 rounding";
  EXPECT_EQ(differ, 0) << "lerps that differ from the two launches'";
  for (int64_t i = 0; i < sb.pool_rows * stride; ++i) {
    EXPECT_NEAR(pool.at(i), pool_h[size_t(i)], 2e-5f * std::fabs(pool_h[size_t(i)]) + 2e-5f) << "pool float " << i;
    EXPECT_EQ(pool.at(i), pool_two.at(i)) << "pool float " << i << " against the two launches";
  }
  EXPECT_TRUE(out.outside_untouched());
}

TEST(EmulatedRwkv7Step, NormFusedIntoTheTokenShiftMatchesTheCpuAndTheTwoLaunches) {
  // Prefill pieces beside a decode token and an empty sequence, the time mix's six lerps, slots out of order.
  check_norm_shift({5, 1, 0, 9}, {3, 0, 5, 1}, 96, 6, true, 230, 0, 2);
  check_norm_shift({1, 1, 1}, {2, 0, 1}, 40, 1, false, 90, 40, 1);  // decode; the channel mix's row, no bias
  check_norm_shift({70}, {0}, 64, 1, true, 64, 0, 3);                // one sequence over 24 warps: three rounds
  check_norm_shift({1, 1, 1, 1}, {1, -1, 0, -1}, 48, 6, true, 100, 0, 1);  // a decode step padded to a bucket
}

}  // namespace
}  // namespace attnzoo
