#include "kernels/linear/short_conv/short_conv.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/float_dtype.h"
#include "core/threads.h"
#include "kernels/linear/common/ssm_args.h"
#include "kernels/linear/short_conv/conv_problem.h"

namespace attnzoo {
namespace {

void check_state(const TensorView& s, const char* name, int64_t N, int64_t D, int64_t W, int64_t* S) {
  if (s.empty()) return;
  if (s.dtype != DType::f32) throw DTypeError(std::string(name) + ": expected float32, got " + dtype_name(s.dtype));
  require(s.ndim == 3 && s.shape[0] == N && s.shape[1] == D && s.shape[2] >= W - 1, name,
          "expected [" + std::to_string(N) + ", " + std::to_string(D) + ", S] with S >= " + std::to_string(W - 1) +
              ", got " + s.shape_str());
  require(s.is_contiguous(), name, "must be contiguous");
  require(*S == 0 || *S == s.shape[2], name, "state lengths of initial_state and final_state differ");
  *S = s.shape[2];
}

// The reference reads on the host; the prefill and the decode step have device paths.
void require_conv_host(const TensorView& x, const TensorView& weight, const TensorView& y,
                       const CausalConv1dOptions& opts, const char* entry) {
  ssm::require_host_entry({{&x, "x"}, {&weight, "weight"}, {&opts.bias, "bias"}, {&y, "y"},
                           {&opts.initial_state, opts.initial_state_name}, {&opts.final_state, opts.final_state_name}},
                          entry, "causal_conv1d, like causal_conv1d_update,");
}

}  // namespace

ConvProblem make_conv_problem(const TensorView& x, const TensorView& weight, const TensorView& y,
                              const CausalConv1dOptions& opts) {
  require(!x.empty(), "x", "is required");
  ssm::require_same_device({{&x, "x"}, {&weight, "weight"}, {&opts.bias, "bias"}, {&y, "y"},
                            {&opts.initial_state, opts.initial_state_name},
                            {&opts.final_state, opts.final_state_name}});
  require(x.ndim == 3, "x", "expected [B, T, D], got " + x.shape_str());
  require(x.is_contiguous(), "x", "must be contiguous");
  require_float_dtype(x, "x");
  require_float_dtype(weight, "weight");
  require_float_dtype(y, "y");
  ConvProblem p;
  const int64_t B = x.shape[0], T = x.shape[1];
  p.D = x.shape[2];
  require(p.D >= 1, "x", "needs at least one channel");
  require(weight.ndim == 2 && weight.shape[0] == p.D && weight.shape[1] >= 1, "weight",
          "expected [" + std::to_string(p.D) + ", W], got " + weight.shape_str());
  require(weight.is_contiguous(), "weight", "must be contiguous");
  p.W = weight.shape[1];
  require(p.W <= 16, "weight", "width " + std::to_string(p.W) + " is not a short convolution (at most 16)");
  require(y.ndim == 3 && y.shape[0] == B && y.shape[1] == T && y.shape[2] == p.D, "y",
          "expected " + x.shape_str() + ", got " + y.shape_str());
  require(y.is_contiguous(), "y", "must be contiguous");
  {  // token blocks run in parallel, so a y overlapping x would be read after being written
    const auto* xb = static_cast<const char*>(x.data);
    const auto* yb = static_cast<const char*>(y.data);
    const size_t xn = size_t(x.numel()) * dtype_size(x.dtype), yn = size_t(y.numel()) * dtype_size(y.dtype);
    require(yb + yn <= xb || xb + xn <= yb, "y", "must not overlap x");
  }
  p.seqs = make_sequence_spans(B, T, opts.cu_seqlens, opts.cu_seqlens_len);
  const int64_t N = p.seqs.count();
  if (opts.conv_state_indices) {
    // Pool rows: checked here, then a dense [N, D, S] view of the same address stands in for the state checks (a
    // device problem's states are never read on the host).
    const ssm::PoolStates pool = ssm::require_pool_states(opts.initial_state, opts.final_state, "conv_state_indices",
                                                          x.device, {{p.D, "D"}, {-1, "S"}});
    TensorView dense = TensorView::contiguous(pool.base, DType::f32, {N, p.D, opts.final_state.shape[2]});
    dense.device = x.device;
    check_state(dense, opts.final_state_name, N, p.D, p.W, &p.S);
    p.initial_state = p.final_state = pool.base;
    p.state_indices = opts.conv_state_indices;
    p.state_stride = pool.row_stride;
  } else {
    check_state(opts.initial_state, opts.initial_state_name, N, p.D, p.W, &p.S);
    check_state(opts.final_state, opts.final_state_name, N, p.D, p.W, &p.S);
    p.state_stride = p.D * p.S;  // dense states; make_conv_update_problem's pool rows set their own
    p.initial_state = opts.initial_state.empty() ? nullptr : opts.initial_state.ptr<float>();
    p.final_state = opts.final_state.empty() ? nullptr : opts.final_state.ptr<float>();
  }
  p.device = x.device;
  p.x = x.data;
  p.x_dtype = x.dtype;
  p.y = y.data;
  p.y_dtype = y.dtype;
  p.weight_in = weight;
  p.activation = opts.activation;
  if (!opts.bias.empty()) {
    require_float_dtype(opts.bias, "bias");
    require(opts.bias.ndim == 1 && opts.bias.shape[0] == p.D, "bias",
            "expected [" + std::to_string(p.D) + "], got " + opts.bias.shape_str());
    require(opts.bias.is_contiguous(), "bias", "must be contiguous");
    p.bias_in = opts.bias;
  }
  if (!p.device.is_cpu()) return p;  // the device kernel reads weight and bias there

  p.weight_t.resize(size_t(p.W * p.D));
  for (int64_t d = 0; d < p.D; ++d)
    for (int64_t w = 0; w < p.W; ++w) p.weight_t[size_t(w * p.D + d)] = load_as_f32(weight.data, weight.dtype, d * p.W + w);
  p.bias.assign(size_t(p.D), 0.f);
  if (!opts.bias.empty())
    for (int64_t d = 0; d < p.D; ++d) p.bias[size_t(d)] = load_as_f32(opts.bias.data, opts.bias.dtype, d);
  return p;
}

void causal_conv1d(const TensorView& x, const TensorView& weight, const TensorView& y,
                   const CausalConv1dOptions& opts) {
  const ConvProblem p = make_conv_problem(x, weight, y, opts);
  if (!p.device.is_cpu()) return conv_prefill_on_device(p);  // the one branch to a GPU
  run_causal_conv1d(p);
}

// The definition, in double: each output reads its W inputs from the sequence or, before its start, from the
// initial state; the final state is the last S inputs of (initial state ++ sequence).
void causal_conv1d_reference(const TensorView& x, const TensorView& weight, const TensorView& y,
                             const CausalConv1dOptions& opts) {
  require_conv_host(x, weight, y, opts, "causal_conv1d_reference");
  const ConvProblem p = make_conv_problem(x, weight, y, opts);
  const int64_t D = p.D, W = p.W, S = p.S;
  ThreadPool::global().parallel_for(p.seqs.count(), [&](int64_t n, int) {
    const int64_t begin = p.seqs.begin[size_t(n)], len = p.seqs.length[size_t(n)];
    auto input = [&](int64_t t, int64_t d) -> double {  // t relative to the sequence start, may be negative
      if (t >= 0) return load_as_f32(p.x, p.x_dtype, (begin + t) * D + d);
      if (p.initial_state && t >= -S) return p.initial_state[(n * D + d) * S + (S + t)];
      return 0.0;
    };
    for (int64_t t = 0; t < len; ++t)
      for (int64_t d = 0; d < D; ++d) {
        double acc = p.bias[size_t(d)];
        for (int64_t w = 0; w < W; ++w) acc += double(p.weight_t[size_t(w * D + d)]) * input(t - (W - 1) + w, d);
        if (p.activation == ConvActivation::silu) acc = acc / (1.0 + std::exp(-acc));
        store_from_f32(p.y, p.y_dtype, (begin + t) * D + d, float(acc));
      }
    if (p.final_state)  // increasing s reads entries at or after s: safe when final_state aliases initial_state
      for (int64_t d = 0; d < D; ++d)
        for (int64_t s = 0; s < S; ++s) p.final_state[(n * D + d) * S + s] = float(input(len - S + s, d));
  });
}

ConvProblem make_conv_update_problem(const TensorView& x, const TensorView& conv_state, const TensorView& weight,
                                     const TensorView& bias, const TensorView& y, ConvActivation activation,
                                     const int32_t* conv_state_indices) {
  require(!conv_state.empty(), "conv_state", "is required");
  CausalConv1dOptions opts;
  opts.bias = bias;
  opts.initial_state = conv_state;
  opts.final_state = conv_state;
  opts.initial_state_name = opts.final_state_name = "conv_state";
  opts.activation = activation;
  if (!conv_state_indices) return make_conv_problem(x, weight, y, opts);
  // Pool rows: checked here, then a dense [N, D, S] view of the same address stands in for make_conv_problem's
  // shape checks (a device problem's states are never read on the host).
  require(x.ndim == 3, "x", "expected [N, L, D], got " + x.shape_str());
  const ssm::PoolStates pool = ssm::require_pool_states(conv_state, conv_state, "conv_state_indices", x.device,
                                                        {{x.shape[2], "D"}, {-1, "S"}}, "conv_state", "conv_state");
  TensorView dense = TensorView::contiguous(pool.base, DType::f32, {x.shape[0], x.shape[2], conv_state.shape[2]});
  dense.device = conv_state.device;
  opts.initial_state = opts.final_state = dense;
  ConvProblem p = make_conv_problem(x, weight, y, opts);
  p.state_indices = conv_state_indices;
  p.state_stride = pool.row_stride;
  return p;
}

void causal_conv1d_update(const TensorView& x, const TensorView& conv_state, const TensorView& weight,
                          const TensorView& bias, const TensorView& y, ConvActivation activation,
                          const int32_t* conv_state_indices) {
  require(x.ndim == 2 || x.ndim == 3, "x", "expected [N, D] or [N, L, D], got " + x.shape_str());
  require(!conv_state.empty(), "conv_state", "is required");
  ssm::require_same_device({{&x, "x"}, {&conv_state, "conv_state"}, {&weight, "weight"}, {&bias, "bias"}, {&y, "y"}});
  require(y.ndim == x.ndim, "y", "must have x's shape " + x.shape_str() + ", got " + y.shape_str());
  TensorView x3 = x, y3 = y;
  if (x.ndim == 2) {
    x3 = TensorView::contiguous(x.data, x.dtype, {x.shape[0], 1, x.shape[1]});
    x3.device = x.device;
    require(x.is_contiguous(), "x", "must be contiguous");
    y3 = TensorView::contiguous(y.data, y.dtype, {y.shape[0], 1, y.shape[1]});
    y3.device = y.device;
    require(y.is_contiguous(), "y", "must be contiguous");
  }
  const ConvProblem p = make_conv_update_problem(x3, conv_state, weight, bias, y3, activation, conv_state_indices);
  if (!p.device.is_cpu()) return conv_update_on_device(p);  // the one branch to a GPU
  run_causal_conv1d(p);
}

}  // namespace attnzoo
