// Chunked and recurrent gated delta rule against the double-precision reference, on every SIMD target.
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "kernels/linear/common/delta_testing.h"

namespace attnzoo {
namespace {
using testing::DeltaCase;
using testing::HostTensor;

void check(const DeltaCase& c) {
  testing::check_delta_case(c, chunk_gated_delta_rule, recurrent_gated_delta_rule, gated_delta_rule_reference);
}

TEST(GatedDeltaRule, RaggedLengths) {
  for (int64_t T : {1, 15, 63, 64, 65, 500, 1000}) check({.T = T, .K = 64, .V = 64});
}

TEST(GatedDeltaRule, HeadDims) {
  for (int64_t K : {16, 60, 64, 100, 128}) check({.T = 100, .K = K, .V = K == 60 ? 100 : K});
  check({.T = 70, .H = 1, .HV = 1, .K = 100, .V = 60});
}

TEST(GatedDeltaRule, GroupedValueHeads) {
  check({.B = 2, .T = 90, .H = 2, .HV = 4});
  check({.T = 90, .H = 1, .HV = 3, .initial_state = true});
}

TEST(GatedDeltaRule, DecayStrengths) {
  check({.T = 300, .g_min = 0.f, .g_max = 0.f, .initial_state = true});     // g = 0 exactly
  check({.T = 300, .g_min = -0.05f, .g_max = 0.f});                           // weak
  check({.T = 300, .g_min = -8.f, .g_max = -8.f, .initial_state = true});     // strong
  check({.T = 300, .g_min = -20.f, .g_max = 0.f});                            // mixed, very strong at times
}

TEST(GatedDeltaRule, Betas) {
  check({.T = 200, .beta_min = 0.f, .beta_max = 0.02f, .initial_state = true});  // near 0
  check({.T = 200, .beta_min = 0.98f, .beta_max = 1.f});                         // near 1
  check({.T = 200, .beta_min = 1.f, .beta_max = 1.95f});                          // negative eigenvalues
}

TEST(GatedDeltaRule, L2NormInKernelAndScale) {
  check({.T = 150, .K = 48, .V = 80, .initial_state = true, .l2norm = true});
}

TEST(GatedDeltaRule, VarlenWithInitialState) {
  check({.T = 330, .initial_state = true, .cu_seqlens = {0, 1, 65, 65, 200, 330}});
  check({.T = 330, .cu_seqlens = {0, 130, 330}, .chunk_size = 32});
}

TEST(GatedDeltaRule, ChunkSizes) {
  for (int64_t C : {16, 32, 64, 128}) check({.T = 300, .initial_state = true, .chunk_size = C});
}

TEST(GatedDeltaRule, Bf16Inputs) {
  check({.T = 130, .dtype = DType::bf16});
  check({.T = 130, .dtype = DType::bf16, .out_dtype = DType::bf16, .tolerance = 1e-2});
}

TEST(GatedDeltaRule, LongSequenceStable) {
  for (float g : {0.f, -8.f}) check({.T = 65536, .H = 1, .HV = 1, .K = 16, .V = 16, .g_min = g, .g_max = g});
}

TEST(GatedDeltaRule, RejectsBadArguments) {
  DeltaCase c{.T = 8};
  testing::DeltaInputs in(c);
  HostTensor o(DType::f32, {1, 8, 2, 32}, 0, 0.f);
  auto expect_error = [&](DeltaArgs a, const char* arg) {
    try {
      chunk_gated_delta_rule(a);
      ADD_FAILURE() << "no error for " << arg;
    } catch (const ArgumentError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(arg, 0), 0u) << e.what();
    }
  };
  DeltaArgs a = in.args(c, o, nullptr);
  DeltaArgs bad = a;
  bad.chunk_size = 48;
  expect_error(bad, "chunk_size");
  bad = a;
  bad.g.shape[2] = 3;
  expect_error(bad, "g");
  bad = a;
  bad.v.shape[2] = 3;
  bad.o.shape[2] = 3;
  expect_error(bad, "v");  // 3 value heads over 2 key heads
  bad = a;
  bad.k.shape[3] = 16;
  expect_error(bad, "k");
  bad = a;
  bad.g = {};
  EXPECT_NO_THROW(chunk_gated_delta_rule(bad));  // absent gate: the plain delta rule
  HostTensor positive(DType::f32, {1, 8, 2}, 0, 0.f);
  store_from_f32(positive.view.data, DType::f32, 5, 0.5f);
  bad = a;
  bad.g = positive.view;
  expect_error(bad, "g");
  store_from_f32(positive.view.data, DType::f32, 5, NAN);
  expect_error(bad, "g");
  HostTensor state(DType::f32, {2, 2, 32, 32}, 0, 0.f);
  bad = a;
  bad.initial_state = state.view;
  expect_error(bad, "initial_state");
  std::vector<int32_t> cu = {0, 5, 7};
  bad = a;
  bad.cu_seqlens = cu.data();
  bad.cu_seqlens_len = 3;
  expect_error(bad, "cu_seqlens");
  HostTensor ints(DType::i32, {1, 8, 2, 32}, 0, 0.f);
  bad = a;
  bad.q = ints.view;
  EXPECT_THROW(recurrent_gated_delta_rule(bad), DTypeError);
}

}  // namespace
}  // namespace attnzoo
