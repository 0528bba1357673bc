// The gated activation and the residual add (elementwise_cuda.h): one thread per N-element access, grid-stride in
// both directions (x over a row's accesses, y over rows), so a decode step's single long row still spreads over
// many blocks and any row count fits the grid.
#include <cuda_runtime.h>

#include <type_traits>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo {
namespace cuda_step {
namespace {

constexpr int kThreads = 256;

// The formulas of activation_reference with CUDA's IEEE-accurate expf / tanhf / erff (not the __ intrinsics), so
// the two differ by a few ulp of f32.
template <Activation kAct>
__device__ __forceinline__ float activate(float x) {
  if constexpr (kAct == Activation::silu) {
    return x / (1.f + expf(-x));
  } else if constexpr (kAct == Activation::gelu_tanh) {
    constexpr float k = 0.7978845608028654f;  // sqrt(2 / pi)
    return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
  } else if constexpr (kAct == Activation::relu2) {
    return x > 0.f ? x * x : 0.f;
  } else {
    return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
  }
}

struct GatedOp {};
struct AddOp {};

// out = op(a, b) over rows: a, b, out share the shape; each has its own row map.
template <class T>
struct BinaryParams {
  const T* a;
  const T* b;
  T* out;
  RowMap a_rows, b_rows, out_rows;
};

template <class Op, Activation kAct, class T, int N>
__global__ void __launch_bounds__(kThreads) binary_kernel(const BinaryParams<T> p) {
  const int64_t accesses = p.out_rows.cols / N;
  for (int64_t row = blockIdx.y; row < p.out_rows.count; row += gridDim.y) {
    const T* a = p.a + p.a_rows.start(row);
    const T* b = p.b + p.b_rows.start(row);
    T* out = p.out + p.out_rows.start(row);
    for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < accesses; i += int64_t(gridDim.x) * kThreads) {
      float x[N], y[N];
      load<N>(a + i * N, x);
      load<N>(b + i * N, y);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        if constexpr (std::is_same_v<Op, GatedOp>) {
          x[j] = activate<kAct>(x[j]) * y[j];
        } else {
          x[j] += y[j];
        }
      }
      store<N>(out + i * N, x);
    }
  }
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

}  // namespace attnzoo
