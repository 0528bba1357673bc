// The CUDA short-convolution prefill: what it refuses (checked on the host, no GPU needed), and, on a GPU, its
// outputs and final states against causal_conv1d_reference (double) run on the same host data, through the
// public causal_conv1d, so the device branch and both launches are exercised. Compiled by g++ in every CUDA
// build: no CUDA headers here.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/short_conv/conv_problem.h"
#include "kernels/linear/short_conv/cuda/conv_prefill_cuda.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "testing/device_test_util.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;
using testing::OnDevice;

struct Case {
  int64_t B = 1, T = 1, D = 64, W = 4, S = 3;
  std::vector<int32_t> cu;  // packed sequences (B must be 1)
  bool with_h0 = true, with_final = true, in_place = true, with_bias = true, silu = true;
  DType dtype = DType::f32, out_dtype = DType::f32;
  int64_t nseq() const { return cu.empty() ? B : int64_t(cu.size()) - 1; }
  std::string label() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " D=" + std::to_string(D) + " W=" +
           std::to_string(W) + " S=" + std::to_string(S) + (with_h0 ? " h0" : "") +
           (with_final ? (in_place ? " in-place" : " separate") : "") + " " + dtype_name(dtype) + "->" +
           dtype_name(out_dtype) + (silu ? " silu" : "") + (cu.empty() ? "" : " packed");
  }
};

struct Inputs {
  HostTensor x, w, b, h0;
  explicit Inputs(const Case& c)
      : x(c.dtype, {c.B, c.T, c.D}, 1), w(c.dtype, {c.D, c.W}, 2, 0.5f), b(c.dtype, {c.D}, 3),
        h0(DType::f32, {c.nseq(), c.D, c.S}, 4) {}
  CausalConv1dOptions options(const Case& c) const {
    CausalConv1dOptions o;
    if (c.with_bias) o.bias = b.view;
    if (c.with_h0) o.initial_state = h0.view;
    o.activation = c.silu ? ConvActivation::silu : ConvActivation::none;
    if (!c.cu.empty()) o.cu_seqlens = c.cu.data(), o.cu_seqlens_len = int64_t(c.cu.size());
    return o;
  }
};

TEST(CudaConvPrefill, RefusesWhatItDoesNotDo) {
  Case c;
  c.T = 5, c.dtype = DType::bf16;
  const Inputs in(c);
  HostTensor y(c.dtype, {c.B, c.T, c.D}, 0, 0.f), s(DType::f32, {1, c.D, c.S}, 0, 0.f);
  CausalConv1dOptions opts = in.options(c);
  opts.final_state = s.view;
  const ConvProblem good = make_conv_problem(in.x.view, in.w.view, y.view, opts);
  EXPECT_NO_THROW(check_cuda_conv_prefill(good));
  ConvProblem p = good;
  p.x = static_cast<const char*>(p.x) + 1;
  testing::expect_error<ArgumentError>([&] { check_cuda_conv_prefill(p); }, "x: data must be aligned");
  p = good;
  p.initial_state = reinterpret_cast<const float*>(reinterpret_cast<const char*>(p.initial_state) + 2);
  testing::expect_error<ArgumentError>([&] { check_cuda_conv_prefill(p); }, "initial_state: data must be aligned");
}

#if ATTNZOO_WITH_CUDA

// Runs case `c` through causal_conv1d on the GPU (the final state over the initial one when `in_place`, else into
// a separate buffer that starts as NaN bytes) and compares with the reference; the state only moves inputs, so it
// must match exactly.
void check(const Case& c) {
  SCOPED_TRACE(c.label());
  const Inputs in(c);
  const std::vector<int64_t> xs{c.B, c.T, c.D};
  HostTensor y_ref(DType::f32, xs, 0, 0.f), s_ref(DType::f32, {c.nseq(), c.D, c.S}, 0, 0.f);
  CausalConv1dOptions opts = in.options(c);
  if (c.with_final) opts.final_state = s_ref.view;
  causal_conv1d_reference(in.x.view, in.w.view, y_ref.view, opts);

  HostTensor y(c.out_dtype, xs, 0, 0.f), s(DType::f32, {c.nseq(), c.D, c.S}, 0, 0.f);
  testing::fill_nan_bytes(y), testing::fill_nan_bytes(s);
  const OnDevice x(in.x), w(in.w), b(in.b), h0(in.h0), yd(y), sd(s);
  if (c.with_bias) opts.bias = b.view;
  if (c.with_h0) opts.initial_state = h0.view;
  const bool same = c.with_final && c.in_place && c.with_h0;
  if (c.with_final) opts.final_state = same ? h0.view : sd.view;
  causal_conv1d(x.view, w.view, yd.view, opts);
  synchronize(current_stream());
  yd.download(y);
  EXPECT_LE(testing::relative_rms(y, y_ref), c.out_dtype == DType::f32 ? 1e-5 : 1e-2);
  if (!c.with_final) return;
  (same ? h0 : sd).download(s);
  EXPECT_EQ(testing::max_abs_diff(s, s_ref), 0.0);
}

// Mamba-2 2.7B's conv (D 5376, W 4) over packed sequences of 1, 200, 0 and 311 tokens, in place and separate.
TEST(CudaConvPrefill, MatchesRaggedPackedSequences) {
  REQUIRE_GPU();
  for (bool in_place : {true, false})
    check({.T = 512, .D = 5376, .cu = {0, 1, 201, 201, 512}, .in_place = in_place});
  check({.T = 512, .D = 200, .cu = {0, 1, 201, 201, 512}, .with_h0 = false, .in_place = false});
}

TEST(CudaConvPrefill, MatchesPaddedBatchesAndWindows) {
  REQUIRE_GPU();
  check({.B = 4, .T = 257, .D = 1024, .with_final = false, .with_bias = false, .silu = false});
  check({.B = 2, .T = 9, .D = 40, .W = 1, .S = 0, .with_h0 = false, .with_final = false});
  for (int64_t W : {2, 3, 5, 8, 9, 16})
    check({.T = 90, .D = 136, .W = W, .S = W + 2, .cu = {0, 2, 5, 90}});  // sequences shorter than the state
}

TEST(CudaConvPrefill, MatchesDtypes) {
  REQUIRE_GPU();
  check({.B = 2, .T = 100, .D = 256, .dtype = DType::bf16});
  check({.B = 2, .T = 100, .D = 256, .dtype = DType::bf16, .out_dtype = DType::bf16});
  check({.T = 100, .D = 256, .cu = {0, 3, 100}, .in_place = false, .dtype = DType::f16, .out_dtype = DType::f16});
}

#endif

}  // namespace
}  // namespace attnzoo
