// delta_gates_cuda's kernel (layers/cuda/delta_gates_kernel.cuh) under the CTA emulator against the CPU mixers' own
// formulas (beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias) with sequence_schedule.h's softplus): Gated
// DeltaNet's one decay per value head and KDA's per head and key channel (one A per K columns, dt_bias per column),
// b and a read as slices of wider projection rows, arguments past softplus's cut at 20 included, the grid capped so
// its loops take several rounds; nothing past g and beta written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "layers/cuda/delta_gates_kernel.cuh"
#include "layers/sequence_schedule.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/strided_operand.h"

namespace attnzoo {
namespace {
using namespace cuda_step;
using cuda_emulation::StridedOperand;

// Ng decays in groups of `group` columns per A, Nb write strengths; projection rows `row` wide.
void check_gates(int64_t T, int64_t Ng, int64_t group, int64_t Nb, int64_t row) {
  SCOPED_TRACE("T " + std::to_string(T) + " Ng " + std::to_string(Ng) + " group " + std::to_string(group) + " Nb " +
               std::to_string(Nb) + " row " + std::to_string(row));
  // a with a spread wide enough to cross 20.
  StridedOperand b(DType::f32, {T, Nb}, 1, {row, 1}, 3.f), a(DType::f32, {T, Ng}, 2, {row, 1}, 12.f);
  StridedOperand neg_A(DType::f32, {Ng / group}, 3), dt_bias(DType::f32, {Ng}, 4);
  for (int64_t h = 0; h < Ng / group; ++h) neg_A.set(h, -std::exp(neg_A.at(h)));
  neg_A.upload();
  StridedOperand g(DType::f32, {T, Ng}, 5), beta(DType::f32, {T, Nb}, 6);
  const DeltaGateParams p{b.device_ptr<const float>(),     a.device_ptr<const float>(),
                          row,                             row,
                          neg_A.device_ptr<const float>(), dt_bias.device_ptr<const float>(),
                          g.device_ptr<float>(),           beta.device_ptr<float>(),
                          T,                               Ng,
                          Nb,                              group};
  const unsigned blocks = std::min<unsigned>(grid_for(T * std::max(Ng, Nb), kGateThreads), 2);
  cuda_emulation::launch(dim3(blocks), kGateThreads, 0, [&](unsigned char*) { delta_gates(p); });
  g.download();
  beta.download();
  int crossed = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < Ng; ++j) {
      const float x = a.at(t * row + j) + dt_bias.at(j);
      const float want = neg_A.at(j / group) * softplus(x);
      crossed += x > 20.f;
      EXPECT_NEAR(g.at(t * Ng + j), want, 4e-7f * std::fabs(want) + 1e-7f) << "g " << t << ", " << j;
    }
    for (int64_t h = 0; h < Nb; ++h) {
      const float want = 1.f / (1.f + std::exp(-b.at(t * row + h)));
      EXPECT_NEAR(beta.at(t * Nb + h), want, 4e-7f * std::fabs(want) + 1e-7f) << "beta " << t << ", " << h;
    }
  }
  EXPECT_GT(crossed, 0) << "no argument past softplus's cut";
  EXPECT_TRUE(g.outside_untouched());
  EXPECT_TRUE(beta.outside_untouched());
}

TEST(EmulatedDeltaGates, MatchTheCpuMixersFormulas) {
  check_gates(77, 16, 1, 16, 48);  // Gated DeltaNet: a decay per value head; b | a | more columns in each row
  check_gates(300, 3, 1, 3, 7);    // odd widths; 900 gates over two blocks of 256 threads: two rounds
  check_gates(9, 96, 32, 3, 100);  // KDA: 3 heads of 32 key channels, a decay per channel, one A per head
}

}  // namespace
}  // namespace attnzoo
