#pragma once
// The device side of the gated activation and the residual add (elementwise.cu launches them; elementwise_cuda.h
// has the contract): one thread per N-element access, grid-stride in both directions (x over a row's accesses, y
// over rows), so a decode step's single long row still spreads over many blocks and any row count fits the grid.
#include <type_traits>

#include "layers/activations.h"
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo::cuda_step {

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
struct MulOp {};
struct SigmoidGateOp {};  // a * sigmoid(b): the attention output gate

// out = op(a, b) over rows: a, b, out share the shape; each has its own row map.
template <class T>
struct BinaryParams {
  const T* a;
  const T* b;
  T* out;
  RowMap a_rows, b_rows, out_rows;
};

template <class Op, Activation kAct, class T, int N>
__device__ __forceinline__ void binary_rows(const BinaryParams<T>& p) {
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
        } else if constexpr (std::is_same_v<Op, MulOp>) {
          x[j] *= y[j];
        } else if constexpr (std::is_same_v<Op, SigmoidGateOp>) {
          x[j] *= 1.f / (1.f + expf(-y[j]));
        } else {
          x[j] += y[j];
        }
      }
      store<N>(out + i * N, x);
    }
  }
}

}  // namespace attnzoo::cuda_step
