// The CUDA short-convolution prefill (conv_prefill_kernel.cuh, its two launches as conv_prefill_launch plans them)
// under the CTA emulator, against the double reference (causal_conv1d_reference) and the CPU twin (causal_conv1d):
// ragged packed sequences with a one-token and an empty one and sequences spanning several 64-token tiles, padded
// batches, channels off the 128-wide blocks, every window register width (W = 1 .. 16), states longer than the
// window and sequences shorter than the state (the final tail then mixes the initial state and the inputs), no
// state, in-place and separate final states, bias or none, SiLU or none, bf16 / f16 / f32 in and out. Outputs and
// separate final states start as NaN bytes, so an element the kernels forget fails.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "kernels/linear/short_conv/conv_problem.h"
#include "kernels/linear/short_conv/cuda/conv_prefill_cuda.h"
#include "kernels/linear/short_conv/cuda/conv_prefill_launch.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "testing/cuda_emulation/conv_prefill_stages.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using cuda_emulation::DeviceTensor;
using cuda_emulation::download;
using cuda_emulation::on_device;
using testing::HostTensor;

enum class Final { none, separate, in_place };

struct ConvCase {
  int64_t B = 1, T = 1, D = 64, W = 4, S = 3;  // S = 0: no states
  std::vector<int32_t> cu_seqlens;
  bool initial_state = true, bias = true, silu = true;
  Final final = Final::in_place;
  DType dtype = DType::f32, out = DType::f32;
  int64_t nseq() const { return cu_seqlens.empty() ? B : int64_t(cu_seqlens.size()) - 1; }
  std::string label() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " D=" + std::to_string(D) + " W=" +
           std::to_string(W) + " S=" + std::to_string(S) + (initial_state ? " h0" : "") +
           (final == Final::none ? "" : final == Final::in_place ? " in-place" : " separate") +
           (bias ? " bias" : "") + (silu ? " silu " : " ") + dtype_name(dtype) + "->" + dtype_name(out) +
           (cu_seqlens.empty() ? "" : " packed");
  }
};

ConvCase shape(int64_t B, int64_t T, int64_t D, int64_t W, int64_t S) {
  ConvCase c;
  c.B = B, c.T = T, c.D = D, c.W = W, c.S = S;
  return c;
}

// The same host options for the reference, the CPU twin and (with device views swapped in) the kernels.
void check(const ConvCase& c, uint64_t seed) {
  SCOPED_TRACE(c.label());
  const int64_t N = c.nseq();
  const std::vector<int64_t> xs{c.B, c.T, c.D}, ss{N, c.D, c.S};
  HostTensor x(c.dtype, xs, seed), w(c.dtype, {c.D, c.W}, seed + 1, 0.5f), b(c.dtype, {c.D}, seed + 2),
      h0(DType::f32, ss, seed + 3);
  const bool has_final = c.S > 0 && c.final != Final::none;
  const bool in_place = has_final && c.final == Final::in_place && c.initial_state;
  CausalConv1dOptions o;
  if (c.bias) o.bias = b.view;
  if (c.S > 0 && c.initial_state) o.initial_state = h0.view;
  o.activation = c.silu ? ConvActivation::silu : ConvActivation::none;
  if (!c.cu_seqlens.empty()) o.cu_seqlens = c.cu_seqlens.data(), o.cu_seqlens_len = int64_t(c.cu_seqlens.size());

  HostTensor y_ref(DType::f32, xs, 0, 0.f), s_ref(DType::f32, ss, 0, 0.f);
  if (has_final) o.final_state = s_ref.view;
  causal_conv1d_reference(x.view, w.view, y_ref.view, o);
  HostTensor y_cpu(DType::f32, xs, 0, 0.f), s_cpu(DType::f32, ss, 0, 0.f);
  if (has_final) o.final_state = s_cpu.view;
  causal_conv1d(x.view, w.view, y_cpu.view, o);

  HostTensor y(c.out, xs, 0, 0.f), s(DType::f32, ss, 0, 0.f);
  testing::fill_nan_bytes(y), testing::fill_nan_bytes(s);
  const DeviceTensor xd = on_device(x), wd = on_device(w), bd = on_device(b), yd = on_device(y), sd = on_device(s);
  DeviceTensor init = on_device(h0);
  if (c.bias) o.bias = bd.device_view();
  if (c.S > 0 && c.initial_state) o.initial_state = init.device_view();
  if (has_final) o.final_state = in_place ? init.device_view() : sd.device_view();
  const ConvProblem p = make_conv_problem(xd.device_view(), wd.device_view(), yd.device_view(), o);
  ASSERT_NO_THROW(check_cuda_conv_prefill(p));

  cuda_conv_prefill::PrefillLaunch l = cuda_conv_prefill::plan_conv_prefill(p);
  ASSERT_FALSE(l.empty);
  cuda_emulation::run_conv_prefill(l, seed);
  download(yd, y);
  const double tol = c.out == DType::f32 ? 1e-5 : 1e-2;
  EXPECT_LE(testing::relative_rms(y, y_ref), tol);
  EXPECT_LE(testing::relative_rms(y, y_cpu), tol);
  if (!has_final) return;
  download(in_place ? init : sd, s);
  // The final state only moves inputs: bit for bit.
  EXPECT_EQ(testing::max_abs_diff(s, s_ref), 0.0);
  EXPECT_EQ(testing::max_abs_diff(s, s_cpu), 0.0);
}

// Packed sequences of 1, 69 (two tiles), 0, 5 and 125 (two tiles) tokens; D = 200 leaves the second channel
// block part empty. In place over an initial state, then into a separate one from none.
TEST(EmulatedConvPrefill, MatchesRaggedPackedSequences) {
  ConvCase c = shape(1, 200, 200, 4, 3);
  c.cu_seqlens = {0, 1, 70, 70, 75, 200};
  check(c, 10);
  c.initial_state = false, c.final = Final::separate;
  check(c, 11);
}

// Padded batches across tile boundaries, without bias, activation or final state; and without any state.
TEST(EmulatedConvPrefill, MatchesPaddedBatches) {
  ConvCase c = shape(3, 65, 64, 4, 3);
  c.bias = false, c.silu = false, c.final = Final::none;
  check(c, 20);
  c = shape(2, 130, 136, 4, 0);
  check(c, 21);
}

// Every window register width: W = 1 (no state), 2 and 4 (width 4), 5 and 8 (width 8), 9 and 16 (width 16); states
// longer than the window; sequences of 2 and 3 tokens shorter than the state (their tails keep state entries).
TEST(EmulatedConvPrefill, MatchesWindowsAndStateLengths) {
  check(shape(2, 9, 40, 1, 0), 30);
  uint64_t seed = 31;
  for (int64_t W : {2, 4, 5, 8, 9, 16}) {
    ConvCase c = shape(1, 80, 72, W, W + 2);
    c.cu_seqlens = {0, 2, 5, 80};
    check(c, seed++);
    c.final = Final::separate;
    check(c, seed++);
  }
}

TEST(EmulatedConvPrefill, MatchesDtypes) {
  ConvCase c = shape(1, 70, 96, 4, 3);
  c.cu_seqlens = {0, 3, 70};
  c.dtype = DType::bf16;
  check(c, 40);
  c.out = DType::bf16;
  check(c, 41);
  c.dtype = c.out = DType::f16;
  c.final = Final::separate;
  check(c, 42);
}

}  // namespace
}  // namespace attnzoo
