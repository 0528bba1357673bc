// The delta rule (no decay) against the double-precision reference, on every SIMD target. It shares kernels with
// the gated delta rule; these cases cover what is specific to it.
#include "kernels/linear/delta_rule/delta_rule.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "kernels/linear/common/delta_testing.h"

namespace attnzoo {
namespace {
using testing::DeltaCase;
using testing::HostTensor;

constexpr DeltaGate kNone = DeltaGate::none;

void check(const DeltaCase& c) {
  testing::check_delta_case(c, chunk_delta_rule, recurrent_delta_rule, delta_rule_reference);
}

TEST(DeltaRule, RaggedLengthsAndHeadDims) {
  for (int64_t T : {1, 15, 63, 64, 65, 500, 1000}) check({.T = T, .K = 64, .V = 64, .gate = kNone});
  for (int64_t K : {16, 60, 100, 128}) check({.T = 100, .K = K, .V = K == 60 ? 100 : K, .gate = kNone});
}

TEST(DeltaRule, GvaVarlenStateAndBetas) {
  check({.T = 330, .H = 1, .HV = 2, .gate = kNone, .initial_state = true, .cu_seqlens = {0, 1, 65, 65, 200, 330}});
  check({.T = 200, .gate = kNone, .beta_min = 0.f, .beta_max = 0.02f});
  check({.T = 200, .gate = kNone, .beta_min = 1.f, .beta_max = 1.95f, .initial_state = true, .l2norm = true});
  for (int64_t C : {16, 128}) check({.T = 200, .gate = kNone, .chunk_size = C});
}

TEST(DeltaRule, WithoutBetaMeansOne) {
  DeltaCase c{.T = 100, .gate = kNone, .beta_min = 1.f, .beta_max = 1.f};
  testing::DeltaInputs in(c);
  HostTensor o1(DType::f32, {1, 100, 2, 32}, 0, 0.f), o2(DType::f32, {1, 100, 2, 32}, 0, 0.f);
  chunk_delta_rule(in.args(c, o1, nullptr));
  DeltaArgs a = in.args(c, o2, nullptr);
  a.beta = {};
  chunk_delta_rule(a);
  EXPECT_EQ(testing::max_abs_diff(o1, o2), 0.0);
}

TEST(DeltaRule, RejectsGate) {
  DeltaCase c{.T = 8};  // inputs with a gate
  testing::DeltaInputs in(c);
  HostTensor o(DType::f32, {1, 8, 2, 32}, 0, 0.f);
  EXPECT_THROW(chunk_delta_rule(in.args(c, o, nullptr)), ArgumentError);
  EXPECT_THROW(recurrent_delta_rule(in.args(c, o, nullptr)), ArgumentError);
}

TEST(DeltaRule, LongSequenceStable) { check({.T = 65536, .H = 1, .HV = 1, .K = 16, .V = 16, .gate = kNone}); }

}  // namespace
}  // namespace attnzoo
