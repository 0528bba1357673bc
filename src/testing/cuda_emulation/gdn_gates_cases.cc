// gdn_gates_cuda's kernel (layers/cuda/gdn_gates_kernel.cuh) under the CTA emulator against GatedDeltaNetMixer's
// own formulas (beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias) with sequence_schedule.h's softplus):
// b and a read as slices of wider projection rows, arguments past softplus's cut at 20 included, the grid capped
// so its loop takes several rounds; nothing past g and beta written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "layers/cuda/gdn_gates_kernel.cuh"
#include "layers/sequence_schedule.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/strided_operand.h"

namespace attnzoo {
namespace {
using namespace cuda_step;
using cuda_emulation::StridedOperand;

void check_gates(int64_t T, int64_t HV, int64_t row) {
  SCOPED_TRACE("T " + std::to_string(T) + " HV " + std::to_string(HV) + " row " + std::to_string(row));
  // b at column 0 and a at column HV of [T, row] projection rows; a with a spread wide enough to cross 20.
  StridedOperand b(DType::f32, {T, HV}, 1, {row, 1}, 3.f), a(DType::f32, {T, HV}, 2, {row, 1}, 12.f);
  StridedOperand neg_A(DType::f32, {HV}, 3), dt_bias(DType::f32, {HV}, 4);
  for (int64_t h = 0; h < HV; ++h) neg_A.set(h, -std::exp(neg_A.at(h)));
  neg_A.upload();
  StridedOperand g(DType::f32, {T, HV}, 5), beta(DType::f32, {T, HV}, 6);
  const GdnGateParams p{b.device_ptr<const float>(), a.device_ptr<const float>(), row, row,
                        neg_A.device_ptr<const float>(), dt_bias.device_ptr<const float>(), g.device_ptr<float>(),
                        beta.device_ptr<float>(), T, HV};
  const unsigned blocks = std::min<unsigned>(grid_for(T * HV, kGateThreads), 2);
  cuda_emulation::launch(dim3(blocks), kGateThreads, 0, [&](unsigned char*) { gdn_gates(p); });
  g.download();
  beta.download();
  int crossed = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < HV; ++h) {
      const float bv = b.at(t * row + h), av = a.at(t * row + h);
      const float want_beta = 1.f / (1.f + std::exp(-bv));
      const float want_g = neg_A.at(h) * softplus(av + dt_bias.at(h));
      crossed += av + dt_bias.at(h) > 20.f;
      EXPECT_NEAR(beta.at(t * HV + h), want_beta, 4e-7f * std::fabs(want_beta) + 1e-7f) << "beta " << t << ", " << h;
      EXPECT_NEAR(g.at(t * HV + h), want_g, 4e-7f * std::fabs(want_g) + 1e-7f) << "g " << t << ", " << h;
    }
  EXPECT_GT(crossed, 0) << "no argument past softplus's cut";
  EXPECT_TRUE(g.outside_untouched());
  EXPECT_TRUE(beta.outside_untouched());
}

TEST(EmulatedGdnGates, MatchTheCpuMixersFormulas) {
  check_gates(77, 16, 48);  // Qwen3-Next's 32 value heads halved; b | a | more columns in each row
  check_gates(300, 3, 7);   // odd widths; 900 gates over two blocks of 256 threads: two rounds
}

}  // namespace
}  // namespace attnzoo
