// The decode-path contracts of the delta-family recurrent kernel (common/delta_recurrent-inl.h), on every SIMD
// target: final_state may be initial_state (updated in place, identical results), an absent final_state leaves
// initial_state untouched, and check_values = false skips only the value scans. Widths that are whole vectors
// (the kernel works on the caller's buffers) and widths that are not (a padded scratch copy) both run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "kernels/linear/common/delta_testing.h"
#include "kernels/linear/delta_rule/delta_rule.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "kernels/linear/kda/kda.h"

namespace attnzoo {
namespace {
using testing::DeltaCase;
using testing::DeltaInputs;
using testing::HostTensor;

struct Family {
  DeltaGate gate;
  void (*recurrent)(const DeltaArgs&);
  void (*reference)(const DeltaArgs&);
};

const Family kFamilies[] = {{DeltaGate::none, recurrent_delta_rule, delta_rule_reference},
                            {DeltaGate::head, recurrent_gated_delta_rule, gated_delta_rule_reference},
                            {DeltaGate::channel, recurrent_kda, kda_reference}};

HostTensor copy_of(const HostTensor& t) {
  HostTensor c(t.view.dtype, std::vector<int64_t>(t.view.shape.begin(), t.view.shape.begin() + t.view.ndim), 0, 0.f);
  std::memcpy(c.view.data, t.view.data, size_t(t.numel()) * dtype_size(t.view.dtype));
  return c;
}

bool bitwise_equal(const HostTensor& a, const HostTensor& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.view.data, b.view.data, size_t(a.numel()) * dtype_size(a.view.dtype)) == 0;
}

// Cases: decode steps (T = 1, batch of 3), a short multi-token run, and a packed batch with an empty sequence;
// V = 32 and 128 use the caller's buffers, V = 60 the padded scratch.
std::vector<DeltaCase> cases(DeltaGate gate) {
  std::vector<DeltaCase> out;
  for (int64_t V : {32, 60, 128}) {
    out.push_back({.B = 3, .T = 1, .H = 2, .HV = 4, .K = 32, .V = V, .gate = gate, .initial_state = true});
    out.push_back({.B = 2, .T = 5, .H = 1, .HV = 2, .K = 48, .V = V, .gate = gate, .initial_state = true});
    out.push_back({.T = 7, .H = 1, .HV = 1, .K = 16, .V = V, .gate = gate, .initial_state = true,
                   .cu_seqlens = {0, 1, 1, 4, 7}});
  }
  return out;
}

TEST(DeltaRecurrent, InPlaceFinalStateMatchesSeparateBuffers) {
  for (const Family& f : kFamilies) {
    for (const DeltaCase& c : cases(f.gate)) {
      SCOPED_TRACE(c.label());
      const DeltaInputs in(c);
      HostTensor o_ref(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f), s_ref = copy_of(in.init);
      f.reference(in.args(c, o_ref, &s_ref));
      testing::for_each_target([&](Target) {
        HostTensor o_sep(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f), s_sep = copy_of(in.init);
        f.recurrent(in.args(c, o_sep, &s_sep));
        EXPECT_LE(testing::relative_rms(o_sep, o_ref), 1e-4);
        EXPECT_LE(testing::relative_rms(s_sep, s_ref), 1e-4);

        HostTensor o(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f), state = copy_of(in.init);
        DeltaArgs a = in.args(c, o, &state);
        a.initial_state = state.view;  // final_state is initial_state: updated in place
        f.recurrent(a);
        EXPECT_TRUE(bitwise_equal(o, o_sep));
        EXPECT_TRUE(bitwise_equal(state, s_sep));
      });
    }
  }
}

TEST(DeltaRecurrent, WithoutFinalStateTheInitialStateIsUntouched) {
  for (const Family& f : kFamilies) {
    for (const DeltaCase& c : cases(f.gate)) {
      SCOPED_TRACE(c.label());
      const DeltaInputs in(c);
      const HostTensor before = copy_of(in.init);
      HostTensor o_ref(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f);
      f.reference(in.args(c, o_ref, nullptr));
      testing::for_each_target([&](Target) {
        HostTensor o(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f);
        f.recurrent(in.args(c, o, nullptr));
        EXPECT_LE(testing::relative_rms(o, o_ref), 1e-4);
        EXPECT_TRUE(bitwise_equal(in.init, before));
      });
    }
  }
}

TEST(DeltaRecurrent, NoInitialStateStartsFromZeros) {
  for (const Family& f : kFamilies) {
    for (DeltaCase c : cases(f.gate)) {
      c.initial_state = false;
      SCOPED_TRACE(c.label());
      const DeltaInputs in(c);
      HostTensor o_ref(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f), s_ref(DType::f32, {in.N, c.HV, c.K, c.V}, 0, 0.f);
      f.reference(in.args(c, o_ref, &s_ref));
      testing::for_each_target([&](Target) {
        // Garbage in the final-state buffer must not leak into the result.
        HostTensor o(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f), s(DType::f32, {in.N, c.HV, c.K, c.V}, 9, 3.f);
        f.recurrent(in.args(c, o, &s));
        EXPECT_LE(testing::relative_rms(o, o_ref), 1e-4);
        EXPECT_LE(testing::relative_rms(s, s_ref), 1e-4);
      });
    }
  }
}

TEST(DeltaRecurrent, CheckValuesOffSkipsOnlyTheValueScans) {
  DeltaCase c{.B = 2, .T = 1, .H = 1, .HV = 1, .K = 16, .V = 16, .gate = DeltaGate::head, .initial_state = true};
  DeltaInputs in(c);
  static_cast<float*>(in.init.view.data)[0] = std::numeric_limits<float>::quiet_NaN();  // sequence 0 only
  HostTensor o(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f), s(DType::f32, {2, 1, 16, 16}, 0, 0.f);
  DeltaArgs a = in.args(c, o, &s);
  try {
    recurrent_gated_delta_rule(a);
    ADD_FAILURE() << "a NaN initial state must be refused by default";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("initial_state"), std::string::npos) << e.what();
  }
  a.check_values = false;
  recurrent_gated_delta_rule(a);  // the caller vouched for the values: sequence 1 is computed as usual
  DeltaCase clean = c;
  DeltaInputs ref_in(clean);
  HostTensor o_ref(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f);
  gated_delta_rule_reference(ref_in.args(clean, o_ref, nullptr));
  for (int64_t i = 16; i < 32; ++i) EXPECT_NEAR(o.at(i), o_ref.at(i), 1e-4 * (1 + std::fabs(o_ref.at(i))));

  // Shapes and dtypes are still checked.
  HostTensor wrong(DType::f32, {2, 1, 16, 8}, 0, 0.f);
  a.final_state = wrong.view;
  EXPECT_THROW(recurrent_gated_delta_rule(a), ArgumentError);
  HostTensor ints(DType::i32, {2, 1, 16, 16}, 0, 0.f);
  a.final_state = ints.view;
  EXPECT_THROW(recurrent_gated_delta_rule(a), DTypeError);
}

}  // namespace
}  // namespace attnzoo
