// The gated activation, residual add, logits epilogue and query temperature launchers (elementwise_cuda.h); the kernel's body is
// elementwise_kernel.cuh.
#include <type_traits>

#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/elementwise_kernel.cuh"

namespace attnzoo {
namespace cuda_step {
namespace {

template <class Op, Activation kAct, class T, int N>
__global__ void __launch_bounds__(kThreads) binary_kernel(const BinaryParams<T> p) {
  binary_rows<Op, kAct, T, N>(p);
}

// When all three are contiguous, the whole tensor is one row: rows of an odd length then still take 16-byte
// accesses, and a [T, n] of few tokens still fills the grid's x.
Rows as_rows(const TensorView& t, bool flatten, const char* name) {
  if (!flatten) return rows_of(t, name);
  Rows r;
  r.count = t.numel() > 0 ? 1 : 0;
  r.cols = t.numel();
  return r;
}

// Launches `kernel(N)` over `rows` with N = 16 / sizeof(T) (16-byte accesses) when `vec`, N = 1 otherwise: a
// thread per access along a row in x, the rows in y (past 65535, the kernels' grid-stride loop takes the rest).
template <class T, class Kernel>
void launch_rows(const Rows& rows, bool vec, const char* what, Kernel&& kernel) {
  constexpr int V = 16 / sizeof(T);
  const int n = vec ? V : 1;
  const dim3 grid(grid_for(rows.cols / n, kThreads), grid_rows(rows.count));
  if (vec) {
    kernel(std::integral_constant<int, V>{}, grid);
  } else {
    kernel(std::integral_constant<int, 1>{}, grid);
  }
  cuda_check(cudaGetLastError(), what);
}

template <class T, int N, class TY>
__global__ void __launch_bounds__(kThreads) scale_softcap_kernel(const ScaleSoftcapParams<T, TY> p) {
  scale_softcap_rows<T, N, TY>(p);
}

template <class Op, Activation kAct>
void run(const TensorView& a, const TensorView& b, const TensorView& out, Stream stream, float alpha = 1.f) {
  const bool flatten = a.is_contiguous() && b.is_contiguous() && out.is_contiguous();
  const Rows a_rows = as_rows(a, flatten, "a"), b_rows = as_rows(b, flatten, "b"),
             out_rows = as_rows(out, flatten, "out");
  if (out_rows.count == 0 || out_rows.cols == 0) return;
  const DeviceGuard on(a.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  with_float_type(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const BinaryParams<T> p{a.ptr<const T>(), b.ptr<const T>(), out.ptr<T>(), RowMap(a_rows), RowMap(b_rows),
                            RowMap(out_rows), alpha};
    const bool vec = rows_vectorizable(a_rows, a.data, sizeof(T)) && rows_vectorizable(b_rows, b.data, sizeof(T)) &&
                     rows_vectorizable(out_rows, out.data, sizeof(T));
    launch_rows<T>(out_rows, vec, "binary_kernel launch", [&](auto n, dim3 grid) {
      binary_kernel<Op, kAct, T, decltype(n)::value><<<grid, kThreads, 0, s>>>(p);
    });
  });
}

void run_scale_softcap(const TensorView& x, const TensorView& out, float scale, float cap, Stream stream) {
  const bool flatten = x.is_contiguous() && out.is_contiguous();
  const Rows x_rows = as_rows(x, flatten, "x"), out_rows = as_rows(out, flatten, "y");
  if (out_rows.count == 0 || out_rows.cols == 0) return;
  const DeviceGuard on(x.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  // x's type and y's: one, or an f32 x rounded into a 16-bit y.
  with_float_type(x.dtype, [&](auto x_tag) {
    with_float_type(out.dtype, [&](auto y_tag) {
      using T = decltype(x_tag);
      using TY = decltype(y_tag);
      if constexpr (std::is_same_v<T, TY> || std::is_same_v<T, float>) {
        const ScaleSoftcapParams<T, TY> p{x.ptr<const T>(), out.ptr<TY>(), RowMap(x_rows), RowMap(out_rows), scale,
                                          cap};
        const bool vec =
            rows_vectorizable(x_rows, x.data, sizeof(T)) && rows_vectorizable(out_rows, out.data, sizeof(TY));
        launch_rows<T>(out_rows, vec, "scale_softcap_kernel launch", [&](auto n, dim3 grid) {
          scale_softcap_kernel<T, decltype(n)::value, TY><<<grid, kThreads, 0, s>>>(p);
        });
      }
    });
  });
}

template <class T, int N>
__global__ void __launch_bounds__(kThreads) query_temperature_kernel(const TemperatureParams<T> p) {
  query_temperature_rows<T, N>(p);
}

void run_query_temperature(const TensorView& q, const TensorView& positions, float beta, int64_t interval,
                           Stream stream) {
  const Rows rows = rows_of(q, "q");
  if (rows.count == 0 || rows.cols == 0) return;
  const DeviceGuard on(q.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  with_float_type(q.dtype, [&](auto tag) {
    using T = decltype(tag);
    const TemperatureParams<T> p{q.ptr<T>(), RowMap(rows), positions.ptr<const int32_t>(), beta, float(interval)};
    const bool vec = rows_vectorizable(rows, q.data, sizeof(T));
    launch_rows<T>(rows, vec, "query_temperature_kernel launch", [&](auto n, dim3 grid) {
      query_temperature_kernel<T, decltype(n)::value><<<grid, kThreads, 0, s>>>(p);
    });
  });
}

}  // namespace
}  // namespace cuda_step

void gated_activation_cuda(Activation act, const TensorView& gate, const TensorView& up, const TensorView& out,
                           Stream stream) {
  using namespace cuda_step;
  check_gated_activation_cuda(gate, up, out);
  switch (act) {
    case Activation::silu: return run<GatedOp, Activation::silu>(gate, up, out, stream);
    case Activation::gelu_tanh: return run<GatedOp, Activation::gelu_tanh>(gate, up, out, stream);
    case Activation::gelu: return run<GatedOp, Activation::gelu>(gate, up, out, stream);
    case Activation::relu2: return run<GatedOp, Activation::relu2>(gate, up, out, stream);
  }
  throw ArgumentError("act: unknown activation " + std::to_string(int(act)));
}

void add_cuda(const TensorView& a, const TensorView& b, const TensorView& y, Stream stream) {
  check_add_cuda(a, b, y);
  cuda_step::run<cuda_step::AddOp, Activation::silu>(a, b, y, stream);  // the activation is unused by AddOp
}

void add_scaled_cuda(const TensorView& a, const TensorView& b, float alpha, const TensorView& y, Stream stream) {
  check_add_scaled_cuda(a, b, alpha, y);
  cuda_step::run<cuda_step::AddOp, Activation::silu>(a, b, y, stream, alpha);
}

void query_temperature_cuda(const TensorView& q, const TensorView& positions, float beta, int64_t interval,
                            Stream stream) {
  check_query_temperature_cuda(q, positions, beta, interval);
  cuda_step::run_query_temperature(q, positions, beta, interval, stream);
}

void scale_softcap_cuda(const TensorView& x, const TensorView& y, float scale, float cap, Stream stream) {
  check_scale_softcap_cuda(x, y, scale, cap);
  cuda_step::run_scale_softcap(x, y, scale, cap, stream);
}

void mul_cuda(const TensorView& a, const TensorView& b, const TensorView& y, Stream stream) {
  check_add_cuda(a, b, y);  // the same contract
  cuda_step::run<cuda_step::MulOp, Activation::silu>(a, b, y, stream);  // the activation is unused by MulOp
}

void sigmoid_gate_cuda(const TensorView& a, const TensorView& gate, const TensorView& y, Stream stream) {
  check_add_cuda(a, gate, y);  // the same contract
  cuda_step::run<cuda_step::SigmoidGateOp, Activation::silu>(a, gate, y, stream);  // the activation is unused
}

}  // namespace attnzoo
