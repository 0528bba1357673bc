#pragma once
// The device side of delta_gates_cuda (delta_gates.cu launches it; delta_gates_cuda.h has the contract): one thread
// per decay, then per write strength, grid-stride. CUDA's IEEE-accurate expf / log1pf (not the __ intrinsics), so
// the gates differ from the CPU's by a few ulp of f32.
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo::cuda_step {

constexpr int kGateThreads = 256;

struct DeltaGateParams {
  const float* b;
  const float* a;
  int64_t b_stride, a_stride;  // row strides, elements
  const float* neg_A;          // [Ng / group]
  const float* dt_bias;        // [Ng]
  float* g;                    // [T, Ng]
  float* beta;                 // [T, Nb]
  int64_t T, Ng, Nb, group;
};

__device__ __forceinline__ void delta_gates(const DeltaGateParams& p) {
  const int64_t step = int64_t(gridDim.x) * kGateThreads, first = int64_t(blockIdx.x) * kGateThreads + threadIdx.x;
  for (int64_t i = first; i < p.T * p.Ng; i += step) {
    const int64_t t = i / p.Ng, j = i % p.Ng;
    const float x = p.a[t * p.a_stride + j] + p.dt_bias[j];
    p.g[i] = p.neg_A[j / p.group] * (x > 20.f ? x : log1pf(expf(x)));
  }
  for (int64_t i = first; i < p.T * p.Nb; i += step) {
    const int64_t t = i / p.Nb, h = i % p.Nb;
    p.beta[i] = 1.f / (1.f + expf(-p.b[t * p.b_stride + h]));
  }
}

}  // namespace attnzoo::cuda_step
