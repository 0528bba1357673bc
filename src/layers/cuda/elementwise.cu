// The gated activation and the residual add launchers (elementwise_cuda.h); the kernel's body is
// elementwise_kernel.cuh.
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

template <class Op, Activation kAct>
void run(const TensorView& a, const TensorView& b, const TensorView& out, Stream stream) {
  const bool flatten = a.is_contiguous() && b.is_contiguous() && out.is_contiguous();
  const Rows a_rows = as_rows(a, flatten, "a"), b_rows = as_rows(b, flatten, "b"),
             out_rows = as_rows(out, flatten, "out");
  if (out_rows.count == 0 || out_rows.cols == 0) return;
  const DeviceGuard on(a.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  with_float_type(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = 16 / sizeof(T);
    const BinaryParams<T> p{a.ptr<const T>(), b.ptr<const T>(), out.ptr<T>(), RowMap(a_rows), RowMap(b_rows),
                            RowMap(out_rows)};
    const bool vec = rows_vectorizable(a_rows, a.data, sizeof(T)) && rows_vectorizable(b_rows, b.data, sizeof(T)) &&
                     rows_vectorizable(out_rows, out.data, sizeof(T));
    const int n = vec ? V : 1;
    const dim3 grid(grid_for(out_rows.cols / n, kThreads), unsigned(out_rows.count < 65535 ? out_rows.count : 65535));
    if (vec) {
      binary_kernel<Op, kAct, T, V><<<grid, kThreads, 0, s>>>(p);
    } else {
      binary_kernel<Op, kAct, T, 1><<<grid, kThreads, 0, s>>>(p);
    }
    cuda_check(cudaGetLastError(), "binary_kernel launch");
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

void mul_cuda(const TensorView& a, const TensorView& b, const TensorView& y, Stream stream) {
  check_add_cuda(a, b, y);  // the same contract
  cuda_step::run<cuda_step::MulOp, Activation::silu>(a, b, y, stream);  // the activation is unused by MulOp
}

void sigmoid_gate_cuda(const TensorView& a, const TensorView& gate, const TensorView& y, Stream stream) {
  check_add_cuda(a, gate, y);  // the same contract
  cuda_step::run<cuda_step::SigmoidGateOp, Activation::silu>(a, gate, y, stream);  // the activation is unused
}

}  // namespace attnzoo
