// Mamba-2: chunked SSD == recurrent == double reference, on every SIMD target.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "core/error.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

struct Case {
  int64_t B = 1, T = 64, H = 2, P = 16, G = 1, N = 16;
  float A_value = -1.f;  // every head's A scaled by (1 + h / H); 0 = no decay
  float dt_scale = 0.5f;  // dt drawn as |N(0, dt_scale)|, or exactly dt_scale with fixed_dt
  bool fixed_dt = false;
  bool with_D = true, D_per_channel = false, with_z = true, with_bias = false, softplus = false;
  bool with_h0 = true;
  std::vector<int32_t> cu;  // packed sequences (B must be 1)
  int64_t chunk = 64;
  DType dtype = DType::f32;
};

struct Inputs {
  HostTensor x, dt, A, B, C, D, z, bias, h0;
  Inputs(const Case& c, int64_t nseq)
      : x(c.dtype, {c.B, c.T, c.H, c.P}, 11), dt(DType::f32, {c.B, c.T, c.H}, 12, c.dt_scale), A(DType::f32, {c.H}, 0, 0),
        B(c.dtype, {c.B, c.T, c.G, c.N}, 13, 0.5f), C(c.dtype, {c.B, c.T, c.G, c.N}, 14, 0.5f),
        D(DType::f32, c.D_per_channel ? std::vector<int64_t>{c.H, c.P} : std::vector<int64_t>{c.H}, 15),
        z(c.dtype, {c.B, c.T, c.H, c.P}, 16), bias(DType::f32, {c.H}, 17, 0.5f), h0(DType::f32, {nseq, c.H, c.P, c.N}, 18) {
    for (int64_t i = 0; i < dt.numel(); ++i) {
      float* v = dt.view.ptr<float>() + i;
      *v = c.fixed_dt ? c.dt_scale : std::fabs(*v);
    }
    for (int64_t h = 0; h < c.H; ++h) A.view.ptr<float>()[h] = c.A_value * (1.f + float(h) / float(c.H));
  }
  Mamba2Args args(const Case& c) const {
    Mamba2Args a;
    a.x = x.view, a.dt = dt.view, a.A = A.view, a.B = B.view, a.C = C.view;
    if (c.with_D) a.D = D.view;
    if (c.with_z) a.z = z.view;
    if (c.with_bias) a.dt_bias = bias.view;
    a.dt_softplus = c.softplus;
    if (c.with_h0) a.initial_state = h0.view;
    if (!c.cu.empty()) a.cu_seqlens = c.cu.data(), a.cu_seqlens_len = int64_t(c.cu.size());
    a.chunk_size = c.chunk;
    return a;
  }
};

void check(const Case& c) {
  const int64_t nseq = c.cu.empty() ? c.B : int64_t(c.cu.size()) - 1;
  Inputs in(c, nseq);
  HostTensor y_ref(DType::f32, {c.B, c.T, c.H, c.P}, 0, 0), s_ref(DType::f32, {nseq, c.H, c.P, c.N}, 0, 0);
  HostTensor y(DType::f32, {c.B, c.T, c.H, c.P}, 0, 0), s(DType::f32, {nseq, c.H, c.P, c.N}, 0, 0);
  Mamba2Args a = in.args(c);
  a.y = y_ref.view, a.final_state = s_ref.view;
  mamba2_reference(a);
  a.y = y.view, a.final_state = s.view;
  const double tol = c.dtype == DType::f32 ? 1e-4 : 1e-2;
  testing::for_each_target([&](Target) {
    mamba2_chunk_scan(a);
    EXPECT_LE(testing::relative_rms(y, y_ref), tol) << "chunk T=" << c.T << " P=" << c.P << " N=" << c.N;
    EXPECT_LE(testing::relative_rms(s, s_ref), tol) << "chunk state T=" << c.T;
    mamba2_recurrent(a);
    EXPECT_LE(testing::relative_rms(y, y_ref), tol) << "recurrent T=" << c.T << " P=" << c.P << " N=" << c.N;
    EXPECT_LE(testing::relative_rms(s, s_ref), tol) << "recurrent state T=" << c.T;
  });
}

TEST(Mamba2, RaggedLengths) {
  for (int64_t T : {1, 15, 63, 64, 65, 500}) check({.T = T});
}

TEST(Mamba2, HeadDimsAndStateSizes) {
  for (int64_t P : {16, 60, 64, 100, 128}) check({.T = 70, .H = 2, .P = P, .N = 16});
  for (int64_t N : {1, 16, 60, 100, 128}) check({.T = 70, .H = 2, .P = 24, .N = N});
}

TEST(Mamba2, GroupsAndManyHeads) {
  check({.B = 2, .T = 90, .H = 8, .P = 16, .G = 2, .N = 32});
  check({.T = 80, .H = 12, .P = 8, .G = 1, .N = 16});  // head blocks inside one group
  check({.T = 40, .H = 6, .P = 8, .G = 6, .N = 8});
}

TEST(Mamba2, ChunkSizes) {
  for (int64_t q : {16, 32, 64, 128}) check({.T = 300, .chunk = q});
}

TEST(Mamba2, PackedSequences) {
  check({.B = 1, .T = 1000, .H = 2, .P = 16, .N = 16, .cu = {0, 1, 64, 65, 300, 1000}});
  check({.B = 1, .T = 130, .H = 2, .P = 16, .N = 16, .with_h0 = false, .cu = {0, 0, 63, 130}});
}

TEST(Mamba2, DecayRangeAndOptions) {
  check({.T = 200, .A_value = 0.f});                                              // no decay
  check({.T = 200, .A_value = -8.f, .dt_scale = 1.f, .fixed_dt = true});          // g = -8 (and -16)
  check({.T = 150, .with_D = true, .D_per_channel = true, .with_z = false, .with_bias = true, .softplus = true});
  check({.T = 150, .with_D = false, .with_z = false, .with_h0 = false});
}

TEST(Mamba2, Bf16Inputs) { check({.B = 2, .T = 100, .H = 2, .P = 32, .N = 16, .dtype = DType::bf16}); }

TEST(Mamba2, LongSequenceStaysFinite) {
  // T = 65536 with strong and with no decay: chunk == recurrent and every value finite.
  for (float A : {-8.f, 0.f}) {
    Case c{.T = 65536, .H = 1, .P = 16, .N = 16, .A_value = A, .dt_scale = 1.f, .fixed_dt = true};
    c.with_z = false;
    Inputs in(c, 1);
    HostTensor y1(DType::f32, {1, c.T, 1, 16}, 0, 0), y2(DType::f32, {1, c.T, 1, 16}, 0, 0);
    HostTensor s1(DType::f32, {1, 1, 16, 16}, 0, 0), s2(DType::f32, {1, 1, 16, 16}, 0, 0);
    Mamba2Args a = in.args(c);
    a.y = y1.view, a.final_state = s1.view;
    mamba2_chunk_scan(a);
    a.y = y2.view, a.final_state = s2.view;
    mamba2_recurrent(a);
    for (int64_t i = 0; i < y1.numel(); ++i) ASSERT_TRUE(std::isfinite(y1.at(i)));
    EXPECT_LE(testing::relative_rms(y1, y2), 1e-4);
    EXPECT_LE(testing::relative_rms(s1, s2), 1e-4);
  }
}

TEST(Mamba2, StateUpdateMatchesReference) {
  const int64_t Bn = 3, H = 4, P = 20, G = 2, N = 24;
  HostTensor x(DType::f32, {Bn, H, P}, 1), dt(DType::f32, {Bn, H}, 2), A(DType::f32, {H}, 3), B(DType::f32, {Bn, G, N}, 4),
      C(DType::f32, {Bn, G, N}, 5), D(DType::f32, {H}, 6), z(DType::f32, {Bn, H, P}, 7), bias(DType::f32, {H}, 8);
  HostTensor state0(DType::f32, {Bn, H, P, N}, 9);
  for (int64_t h = 0; h < H; ++h) A.view.ptr<float>()[h] = -std::fabs(A.at(h));
  testing::for_each_target([&](Target) {
    HostTensor s_ref(DType::f32, {Bn, H, P, N}, 9), s(DType::f32, {Bn, H, P, N}, 9);
    HostTensor y_ref(DType::f32, {Bn, H, P}, 0, 0), y(DType::f32, {Bn, H, P}, 0, 0);
    Mamba2StepArgs a{.state = s_ref.view, .x = x.view, .dt = dt.view, .A = A.view, .B = B.view, .C = C.view,
                     .D = D.view, .z = z.view, .dt_bias = bias.view, .dt_softplus = true, .y = y_ref.view};
    mamba2_state_update_reference(a);
    a.state = s.view, a.y = y.view;
    mamba2_state_update(a);
    EXPECT_LE(testing::relative_rms(y, y_ref), 1e-5);
    EXPECT_LE(testing::relative_rms(s, s_ref), 1e-5);
    EXPECT_GT(testing::relative_rms(s, state0), 1e-3);  // the state really moved
  });
}

TEST(Mamba2, RejectsBadArguments) {
  Case c{.T = 10, .H = 4, .G = 3};
  Inputs in(c, 1);
  HostTensor y(DType::f32, {1, 10, 4, 16}, 0, 0);
  Mamba2Args a = in.args(c);
  a.y = y.view;
  EXPECT_THROW(mamba2_chunk_scan(a), ArgumentError);  // 3 groups do not divide 4 heads
  Case ok{.T = 10};
  Inputs in2(ok, 1);
  HostTensor y2(DType::f32, {1, 10, 2, 16}, 0, 0);
  a = in2.args(ok);
  a.y = y2.view;
  a.chunk_size = 48;
  EXPECT_THROW(mamba2_chunk_scan(a), ArgumentError);
  a.chunk_size = 64;
  HostTensor bad_state(DType::bf16, {1, 2, 16, 16}, 1);
  a.initial_state = bad_state.view;
  EXPECT_THROW(mamba2_recurrent(a), DTypeError);
}

}  // namespace
}  // namespace attnzoo
