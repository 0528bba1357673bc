// Chunked and recurrent KDA (per-channel decay) against the double-precision reference, on every SIMD target.
#include "kernels/linear/kda/kda.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "kernels/linear/common/delta_testing.h"

namespace attnzoo {
namespace {
using testing::DeltaCase;
using testing::HostTensor;

constexpr DeltaGate kChannel = DeltaGate::channel;

void check(const DeltaCase& c) { testing::check_delta_case(c, chunk_kda, recurrent_kda, kda_reference); }

TEST(Kda, RaggedLengths) {
  for (int64_t T : {1, 15, 63, 64, 65, 500, 1000}) check({.T = T, .K = 64, .V = 64, .gate = kChannel});
}

TEST(Kda, HeadDims) {
  for (int64_t K : {16, 60, 64, 100, 128}) check({.T = 100, .K = K, .V = K == 60 ? 100 : K, .gate = kChannel});
  check({.T = 70, .H = 1, .HV = 1, .K = 100, .V = 60, .gate = kChannel});
}

TEST(Kda, GroupedValueHeads) {
  check({.B = 2, .T = 90, .H = 2, .HV = 4, .gate = kChannel});
  check({.T = 90, .H = 1, .HV = 3, .gate = kChannel, .initial_state = true});
}

TEST(Kda, DecayStrengths) {
  check({.T = 300, .gate = kChannel, .g_min = 0.f, .g_max = 0.f, .initial_state = true});
  check({.T = 300, .gate = kChannel, .g_min = -0.05f, .g_max = 0.f});
  check({.T = 300, .gate = kChannel, .g_min = -8.f, .g_max = -8.f, .initial_state = true});
  // Channels that barely decay next to channels that vanish within a token: the sub-chunk references matter.
  check({.T = 300, .gate = kChannel, .g_min = -20.f, .g_max = 0.f, .initial_state = true});
  check({.T = 300, .gate = kChannel, .g_min = -12.f, .g_max = -6.f});
}

TEST(Kda, Betas) {
  check({.T = 200, .gate = kChannel, .beta_min = 0.f, .beta_max = 0.02f, .initial_state = true});
  check({.T = 200, .gate = kChannel, .beta_min = 0.98f, .beta_max = 1.f});
  check({.T = 200, .gate = kChannel, .beta_min = 1.f, .beta_max = 1.95f});
}

TEST(Kda, L2NormInKernel) {
  check({.T = 150, .K = 48, .V = 80, .gate = kChannel, .initial_state = true, .l2norm = true});
}

TEST(Kda, VarlenWithInitialState) {
  check({.T = 330, .gate = kChannel, .initial_state = true, .cu_seqlens = {0, 1, 65, 65, 200, 330}});
}

TEST(Kda, ChunkSizes) {
  for (int64_t C : {16, 32, 64, 128}) check({.T = 300, .gate = kChannel, .initial_state = true, .chunk_size = C});
}

TEST(Kda, Bf16Inputs) {
  check({.T = 130, .gate = kChannel, .dtype = DType::bf16});
  check({.T = 130, .gate = kChannel, .dtype = DType::bf16, .out_dtype = DType::bf16, .tolerance = 1e-2});
}

TEST(Kda, LongSequenceStable) {
  for (float g : {0.f, -8.f})
    check({.T = 65536, .H = 1, .HV = 1, .K = 16, .V = 16, .gate = kChannel, .g_min = g, .g_max = g});
}

TEST(Kda, RejectsBadArguments) {
  DeltaCase c{.T = 8, .gate = kChannel};
  testing::DeltaInputs in(c);
  HostTensor o(DType::f32, {1, 8, 2, 32}, 0, 0.f);
  DeltaArgs a = in.args(c, o, nullptr);
  DeltaArgs bad = a;
  HostTensor head_gate(DType::f32, {1, 8, 2}, 0, 0.f);
  bad.g = head_gate.view;  // a per-head gate is the gated delta rule, not KDA
  EXPECT_THROW(chunk_kda(bad), ArgumentError);
  bad.g = {};
  EXPECT_THROW(recurrent_kda(bad), ArgumentError);
  HostTensor positive(DType::f32, {1, 8, 2, 32}, 0, 0.f);
  store_from_f32(positive.view.data, DType::f32, 77, 1e-3f);
  bad.g = positive.view;
  EXPECT_THROW(kda_reference(bad), ArgumentError);
  bad = a;
  bad.chunk_size = 256;
  EXPECT_THROW(chunk_kda(bad), ArgumentError);
}

}  // namespace
}  // namespace attnzoo
