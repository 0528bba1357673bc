// The CUDA short-convolution decode step: what it refuses (checked on the host, no GPU needed), and, on a GPU,
// its outputs and advanced states against causal_conv1d_reference (double) run on the same host data, through
// the public causal_conv1d_update. Compiled by g++ in every CUDA build: no CUDA headers here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/short_conv/conv_problem.h"
#include "kernels/linear/short_conv/cuda/conv_update_cuda.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "testing/test_util.h"
#include "testing/device_test_util.h"
#include "testing/pool_slots_testing.h"

namespace attnzoo {
namespace {
using testing::HostTensor;
using testing::OnDevice;

#if ATTNZOO_WITH_CUDA

struct Case {
  int64_t N = 2, L = 1, D = 64, W = 4, S = 3;
  bool with_bias = true, silu = true;
  DType dtype = DType::f32, out_dtype = DType::f32;
  std::string label() const {
    return "N=" + std::to_string(N) + " L=" + std::to_string(L) + " D=" + std::to_string(D) + " W=" +
           std::to_string(W) + " S=" + std::to_string(S) + " " + dtype_name(dtype) + "->" + dtype_name(out_dtype) +
           (silu ? " silu" : "");
  }
};

struct Inputs {
  HostTensor x, state, w, b;
  explicit Inputs(const Case& c)
      : x(c.dtype, {c.N, c.L, c.D}, 1), state(DType::f32, {c.N, c.D, c.S}, 2), w(c.dtype, {c.D, c.W}, 3, 0.5f),
        b(c.dtype, {c.D}, 4) {}
};

TEST(CudaConvUpdate, RefusesWhatItDoesNotDo) {
  const Case c{.dtype = DType::bf16};
  const Inputs in(c);
  HostTensor y(c.dtype, {c.N, c.L, c.D}, 0, 0.f);
  CausalConv1dOptions opts;
  opts.bias = in.b.view, opts.initial_state = in.state.view, opts.final_state = in.state.view;
  const ConvProblem good = make_conv_problem(in.x.view, in.w.view, y.view, opts);
  EXPECT_NO_THROW(check_cuda_conv_update(good));
  ConvProblem p = good;
  p.weight_in.data = static_cast<char*>(p.weight_in.data) + 1;
  testing::expect_error<ArgumentError>([&] { check_cuda_conv_update(p); }, "weight: data must be aligned");
  p = good;
  p.final_state = reinterpret_cast<float*>(reinterpret_cast<char*>(p.final_state) + 2);
  testing::expect_error<ArgumentError>([&] { check_cuda_conv_update(p); }, "conv_state: data must be aligned");
}

// L tokens per sequence through causal_conv1d_update on the GPU ([N, D] when L = 1) against the reference's
// prefill of the same tokens from the same state; the state is copied exactly, so it must match exactly.
void check_case(const Case& c) {
  SCOPED_TRACE(c.label());
  const Inputs in(c);
  HostTensor y_ref(DType::f32, {c.N, c.L, c.D}, 0, 0.f), s_ref(DType::f32, {c.N, c.D, c.S}, 0, 0.f);
  CausalConv1dOptions opts;
  if (c.with_bias) opts.bias = in.b.view;
  opts.initial_state = in.state.view, opts.final_state = s_ref.view;
  opts.activation = c.silu ? ConvActivation::silu : ConvActivation::none;
  causal_conv1d_reference(in.x.view, in.w.view, y_ref.view, opts);

  HostTensor y(c.out_dtype, {c.N, c.L, c.D}, 0, 0.f), s(DType::f32, {c.N, c.D, c.S}, 0, 0.f);
  testing::fill_nan_bytes(y);
  const OnDevice x(in.x), state(in.state), w(in.w), b(in.b), yd(y);
  TensorView xv = x.view, yv = yd.view;
  if (c.L == 1) {  // the engine's shape: no token axis
    xv.ndim = yv.ndim = 2;
    xv.shape[1] = yv.shape[1] = c.D;
    xv.strides[0] = yv.strides[0] = c.D, xv.strides[1] = yv.strides[1] = 1;
  }
  causal_conv1d_update(xv, state.view, w.view, c.with_bias ? b.view : TensorView{}, yv, opts.activation);
  synchronize(current_stream());
  yd.download(y);
  state.download(s);
  EXPECT_LE(testing::relative_rms(y, y_ref), c.out_dtype == DType::f32 ? 1e-5 : 1e-2);
  EXPECT_EQ(testing::max_abs_diff(s, s_ref), 0.0);
}

// Mamba-2 2.7B's conv channels (d_inner + 2 N = 5376) at decode, causal-conv1d's S = W - 1 and fla's S = W.
TEST(CudaConvUpdate, MatchesDecodeStep) {
  REQUIRE_GPU();
  check_case({.N = 8, .D = 5376});
  check_case({.N = 3, .D = 4096, .S = 4});
  check_case({.N = 1, .D = 100, .W = 2, .S = 1, .with_bias = false, .silu = false});
}

// Several tokens (speculative decoding), more than the state holds, and a state longer than W - 1.
TEST(CudaConvUpdate, MatchesSeveralTokensAndStateLengths) {
  REQUIRE_GPU();
  check_case({.N = 2, .L = 3, .D = 256});
  check_case({.N = 2, .L = 6, .D = 96, .W = 4, .S = 3});
  check_case({.N = 2, .L = 2, .D = 96, .W = 3, .S = 7, .silu = false});
  check_case({.N = 1, .L = 1, .D = 33, .W = 1, .S = 0});
}

TEST(CudaConvUpdate, MatchesDtypes) {
  REQUIRE_GPU();
  check_case({.N = 4, .D = 512, .dtype = DType::bf16});
  check_case({.N = 4, .D = 512, .dtype = DType::bf16, .out_dtype = DType::bf16});
  check_case({.N = 4, .L = 2, .D = 512, .dtype = DType::f16, .out_dtype = DType::f16});
}

// The decode step on rows of a state pool (conv_state_indices, the GPU runner's decode): scattered, permuted slots
// of a slab whose rows hold more than the tail, and pads (-1), against the reference on the same tails gathered
// (the tails exactly: a shift; testing/pool_slots_testing.h's checks: nothing else of the slab touched, the pads'
// outputs unwritten).
TEST(CudaConvUpdate, MatchesDecodeStepOnPoolSlots) {
  REQUIRE_GPU();
  const int64_t D = 1000, S = 3;
  testing::PoolSlots pool({4, -1, 0, 7, 2, -1}, 8, 5, D * S, 11, 5);
  const int64_t N = pool.count();
  HostTensor x(DType::bf16, {N, D}, 1), dense(DType::f32, {N, D, S}, 2), w(DType::bf16, {D, 4}, 3, 0.5f),
      b(DType::bf16, {D}, 4), y_ref(DType::f32, {N, D}, 0, 0.f), y(DType::f32, {N, D}, 0, 0.f);
  pool.place(dense.view.ptr<float>());
  causal_conv1d_update(x.view, dense.view, w.view, b.view, y_ref.view, ConvActivation::silu);  // dense: after
  testing::fill_nan_bytes(y);
  DeviceBuffer idx(Device::cuda(), pool.index.size() * sizeof(int32_t));
  idx.upload(pool.index.data(), pool.index.size() * sizeof(int32_t));
  const OnDevice xd(x), wd(w), bd(b), yd(y), slab(pool.slab);
  causal_conv1d_update(xd.view, pool.rows(slab.buffer.data(), {D, S}), wd.view, bd.view, yd.view,
                       ConvActivation::silu, idx.as<int32_t>());
  synchronize(current_stream());
  yd.download(y);
  slab.download(pool.slab);
  pool.expect_outputs(y, y_ref, D, 1e-5);
  pool.expect_states(dense.view.ptr<float>(), 0.0);
}

#else

TEST(CudaConvUpdate, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }

#endif

}  // namespace
}  // namespace attnzoo
