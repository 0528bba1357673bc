// RWKV-7: the vectorized recurrence and the chunked (DPLR) form == double reference, on every SIMD target, at
// every chunk size.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "kernels/linear/rwkv7/rwkv7_testing.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

struct Case {
  int64_t B = 1, T = 64, H = 2, K = 16, V = 16;
  float w_value = NAN;  // NaN: w = -exp(N(0, 1)) - 0.01 (RWKV-7 style); else every w equal
  float w_low = NAN;    // if set: w spread over (w_low, 0), per element (strong and no decay side by side)
  bool with_h0 = true;
  std::vector<int32_t> cu;
  DType dtype = DType::f32;
};

struct Inputs {
  HostTensor r, w, k, v, a, b, h0;
  Inputs(const Case& c, int64_t nseq)
      : r(c.dtype, {c.B, c.T, c.H, c.K}, 1), w(c.dtype, {c.B, c.T, c.H, c.K}, 2), k(c.dtype, {c.B, c.T, c.H, c.K}, 3),
        v(c.dtype, {c.B, c.T, c.H, c.V}, 4), a(c.dtype, {c.B, c.T, c.H, c.K}, 5), b(c.dtype, {c.B, c.T, c.H, c.K}, 6),
        h0(DType::f32, {nseq, c.H, c.K, c.V}, 7) {
    testing::shape_rwkv7_transition(a, b, k, c.B * c.T * c.H, c.K);
    for (int64_t e = 0; e < w.numel(); ++e) {
      float wv = std::isnan(c.w_value) ? -std::exp(w.at(e)) - 0.01f : c.w_value;
      if (!std::isnan(c.w_low)) wv = c.w_low * 0.5f * (1.f + std::tanh(w.at(e)));
      store_from_f32(w.view.data, c.dtype, e, wv);
    }
  }
  Rwkv7Args args(const Case& c) const {
    Rwkv7Args x{.r = r.view, .w = w.view, .k = k.view, .v = v.view, .a = a.view, .b = b.view};
    x.scale = 1.f / std::sqrt(float(c.K));
    if (c.with_h0) x.initial_state = h0.view;
    if (!c.cu.empty()) x.cu_seqlens = c.cu.data(), x.cu_seqlens_len = int64_t(c.cu.size());
    return x;
  }
};

constexpr int64_t kChunkSizes[] = {16, 32, 64, 128};

// Outputs start as NaN so that anything a kernel forgets to write fails the comparison.
void poison(HostTensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i) store_from_f32(t.view.data, t.view.dtype, i, NAN);
}

void check(const Case& c) {
  const int64_t nseq = c.cu.empty() ? c.B : int64_t(c.cu.size()) - 1;
  Inputs in(c, nseq);
  HostTensor o_ref(DType::f32, {c.B, c.T, c.H, c.V}, 0, 0), s_ref(DType::f32, {nseq, c.H, c.K, c.V}, 0, 0);
  HostTensor o(DType::f32, {c.B, c.T, c.H, c.V}, 0, 0), s(DType::f32, {nseq, c.H, c.K, c.V}, 0, 0);
  Rwkv7Args a = in.args(c);
  a.o = o_ref.view, a.final_state = s_ref.view;
  rwkv7_reference(a);
  a.o = o.view, a.final_state = s.view;
  const double tol = c.dtype == DType::f32 ? 1e-4 : 1e-2;
  testing::for_each_target([&](Target) {
    poison(o), poison(s);
    recurrent_rwkv7(a);
    EXPECT_LE(testing::relative_rms(o, o_ref), tol) << "T=" << c.T << " K=" << c.K << " V=" << c.V;
    EXPECT_LE(testing::relative_rms(s, s_ref), tol) << "state T=" << c.T;
    for (int64_t chunk : kChunkSizes) {
      poison(o), poison(s);
      chunk_rwkv7(a, chunk);
      EXPECT_LE(testing::relative_rms(o, o_ref), tol)
          << "chunk " << chunk << " T=" << c.T << " K=" << c.K << " V=" << c.V;
      EXPECT_LE(testing::relative_rms(s, s_ref), tol) << "chunk " << chunk << " state T=" << c.T;
    }
  });
}

TEST(Rwkv7, RaggedLengths) {
  for (int64_t T : {1, 15, 63, 64, 65, 500}) {
    check({.T = T});
    check({.T = T, .with_h0 = false});
  }
  check({.T = 1000, .H = 1, .K = 64, .V = 64});
}

TEST(Rwkv7, HeadDims) {
  for (int64_t K : {16, 60, 64, 100, 128}) check({.T = 150, .H = 1, .K = K, .V = 32});
  for (int64_t V : {1, 16, 60, 100, 128}) check({.T = 150, .H = 1, .K = 32, .V = V});
}

TEST(Rwkv7, PackedSequencesAndBatches) {
  check({.T = 300, .cu = {0, 1, 64, 65, 300}});
  check({.T = 70, .with_h0 = false, .cu = {0, 0, 70}});
  check({.B = 3, .T = 50, .H = 3});
}

TEST(Rwkv7, DecayRange) {
  check({.T = 200, .w_value = 0.f});   // no decay: only the low-rank part forgets
  check({.T = 200, .w_value = -8.f});  // strong decay
  check({.T = 200, .w_value = -0.5f});
  check({.T = 300, .K = 64, .V = 64, .w_low = -8.f});  // every strength in one chunk, channel by channel
  check({.T = 300, .K = 64, .V = 64, .w_low = -8.f, .with_h0 = false});
}

TEST(Rwkv7, Bf16Inputs) { check({.B = 2, .T = 100, .H = 2, .K = 32, .V = 32, .dtype = DType::bf16}); }

TEST(Rwkv7, ChunkFinalStateMayAliasInitialState) {
  Case c{.B = 2, .T = 77, .H = 2, .K = 32, .V = 48};
  Inputs in(c, 2);
  HostTensor s_ref(DType::f32, {2, 2, 32, 48}, 0, 0), o_ref(DType::f32, {2, 77, 2, 48}, 0, 0);
  HostTensor o(DType::f32, {2, 77, 2, 48}, 0, 0);
  Rwkv7Args a = in.args(c);
  a.o = o_ref.view, a.final_state = s_ref.view;
  rwkv7_reference(a);
  a.o = o.view, a.final_state = in.h0.view;
  chunk_rwkv7(a, 32);
  EXPECT_LE(testing::relative_rms(o, o_ref), 1e-4);
  EXPECT_LE(testing::relative_rms(in.h0, s_ref), 1e-4);
}

TEST(Rwkv7, InPlaceDecodeStep) {
  // The state as both initial and final state (decode), with V a multiple of the vector length.
  Case c{.B = 2, .T = 1, .H = 2, .K = 32, .V = 64};
  Inputs in(c, 2);
  HostTensor s_ref(DType::f32, {2, 2, 32, 64}, 0, 0), o_ref(DType::f32, {2, 1, 2, 64}, 0, 0), o(DType::f32, {2, 1, 2, 64}, 0, 0);
  Rwkv7Args a = in.args(c);
  a.o = o_ref.view, a.final_state = s_ref.view;
  rwkv7_reference(a);
  a.o = o.view, a.final_state = in.h0.view;  // aliases initial_state
  recurrent_rwkv7(a);
  EXPECT_LE(testing::relative_rms(o, o_ref), 1e-5);
  EXPECT_LE(testing::relative_rms(in.h0, s_ref), 1e-5);
}

TEST(Rwkv7, LongSequenceStaysFinite) {
  for (float w : {-8.f, 0.f}) {
    Case c{.T = 65536, .H = 1, .K = 16, .V = 16, .w_value = w};
    Inputs in(c, 1);
    HostTensor o(DType::f32, {1, c.T, 1, 16}, 0, 0), o_ref(DType::f32, {1, c.T, 1, 16}, 0, 0);
    Rwkv7Args a = in.args(c);
    a.o = o.view;
    recurrent_rwkv7(a);
    a.o = o_ref.view;
    rwkv7_reference(a);
    for (int64_t i = 0; i < o.numel(); ++i) ASSERT_TRUE(std::isfinite(o.at(i)));
    EXPECT_LE(testing::relative_rms(o, o_ref), 1e-4);
    HostTensor oc(DType::f32, {1, c.T, 1, 16}, 0, 0), sc(DType::f32, {1, 1, 16, 16}, 0, 0);
    HostTensor sr(DType::f32, {1, 1, 16, 16}, 0, 0);
    a.o = o.view, a.final_state = sr.view;
    recurrent_rwkv7(a);
    a.o = oc.view, a.final_state = sc.view;
    testing::for_each_target([&](Target) {
      for (int64_t chunk : kChunkSizes) {
        poison(oc);
        chunk_rwkv7(a, chunk);
        for (int64_t i = 0; i < oc.numel(); ++i)
          ASSERT_TRUE(std::isfinite(oc.at(i))) << "chunk " << chunk << " w=" << w;
        EXPECT_LE(testing::relative_rms(oc, o_ref), 1e-4) << "chunk " << chunk << " w=" << w;
        EXPECT_LE(testing::relative_rms(oc, o), 1e-4) << "chunk vs recurrent, chunk " << chunk << " w=" << w;
        EXPECT_LE(testing::relative_rms(sc, sr), 1e-4) << "state, chunk " << chunk << " w=" << w;
      }
    });
  }
}

TEST(Rwkv7, RejectsBadArguments) {
  Case c{.T = 8};
  Inputs in(c, 1);
  HostTensor o(DType::f32, {1, 8, 2, 16}, 0, 0), short_b(DType::f32, {1, 8, 2, 15}, 1), bad_state(DType::bf16, {1, 2, 16, 16}, 1);
  Rwkv7Args a = in.args(c);
  a.o = o.view;
  a.b = short_b.view;
  EXPECT_THROW(recurrent_rwkv7(a), ArgumentError);
  a = in.args(c);
  a.o = o.view;
  a.initial_state = bad_state.view;
  EXPECT_THROW(recurrent_rwkv7(a), DTypeError);
  EXPECT_THROW(chunk_rwkv7(a, 64), DTypeError);
  a = in.args(c);
  a.o = o.view;
  for (int64_t bad : {0, 8, 48, 100, 256}) {
    try {
      chunk_rwkv7(a, bad);
      ADD_FAILURE() << "chunk_size " << bad << " accepted";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("chunk_size"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace attnzoo
