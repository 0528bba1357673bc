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

// out = op(a, b) over rows: a, b, out share the shape; each has its own row map. AddOp adds alpha * b (Granite's
// residual multiplier); alpha 1 is the plain add, exact (a * 1 rounds to nothing, with or without a fused multiply-add).
template <class T>
struct BinaryParams {
  const T* a;
  const T* b;
  T* out;
  RowMap a_rows, b_rows, out_rows;
  float alpha = 1.f;
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
          x[j] += p.alpha * y[j];
        }
      }
      store<N>(out + i * N, x);
    }
  }
}

// The output head's epilogue over logits rows, as DecoderModel's CPU forward orders it: y = x * scale, then, with a
// cap, cap * tanh(y / cap) (Gemma 2's final_logit_softcapping). One thread per N-element access, as binary_rows.
// TY: the output's type, a 16-bit one under an f32 x where the runner hands an un-normed residual row to the
// projections (scale 1, no cap: the rounding alone).
template <class T, class TY = T>
struct ScaleSoftcapParams {
  const T* x;
  TY* out;
  RowMap x_rows, out_rows;
  float scale, cap;  // cap 0: no softcap
};

template <class T, int N, class TY = T>
__device__ __forceinline__ void scale_softcap_rows(const ScaleSoftcapParams<T, TY>& p) {
  const int64_t accesses = p.out_rows.cols / N;
  for (int64_t row = blockIdx.y; row < p.out_rows.count; row += gridDim.y) {
    const T* x = p.x + p.x_rows.start(row);
    TY* out = p.out + p.out_rows.start(row);
    for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < accesses; i += int64_t(gridDim.x) * kThreads) {
      float v[N];
      load<N>(x + i * N, v);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        v[j] *= p.scale;
        if (p.cap > 0.f) v[j] = p.cap * tanhf(v[j] / p.cap);
      }
      store<N>(out + i * N, v);
    }
  }
}

// Llama 4's query temperature (AttentionLayer::scale_queries) on q rows [tokens, heads * head_dim] after RoPE: row t
// times 1 + beta * log(1 + floor(positions[t] / interval)), the factor in f32 as transformers computes it.
template <class T>
struct TemperatureParams {
  T* q;
  RowMap rows;
  const int32_t* positions;
  float beta, interval;
};

template <class T, int N>
__device__ __forceinline__ void query_temperature_rows(const TemperatureParams<T>& p) {
  const int64_t accesses = p.rows.cols / N;
  for (int64_t row = blockIdx.y; row < p.rows.count; row += gridDim.y) {
    const float steps = floorf(float(p.positions[row]) / p.interval);
    const float s = 1.f + p.beta * logf(1.f + steps);
    if (s == 1.f) continue;  // as the CPU, which leaves such rows unrounded
    T* q = p.q + p.rows.start(row);
    for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < accesses; i += int64_t(gridDim.x) * kThreads) {
      float v[N];
      load<N>(q + i * N, v);
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] *= s;
      store<N>(q + i * N, v);
    }
  }
}

}  // namespace attnzoo::cuda_step
