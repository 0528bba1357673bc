#pragma once
// The device side of gdn_gates_cuda (gdn_gates.cu launches it; gdn_gates_cuda.h has the contract): one thread per
// (token, value head), grid-stride. CUDA's IEEE-accurate expf / log1pf (not the __ intrinsics), so the gates
// differ from the CPU's by a few ulp of f32.
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo::cuda_step {

constexpr int kGateThreads = 256;

struct GdnGateParams {
  const float* b;
  const float* a;
  int64_t b_stride, a_stride;  // row strides, elements
  const float* neg_A;
  const float* dt_bias;
  float* g;
  float* beta;
  int64_t T, HV;
};

__device__ __forceinline__ void gdn_gates(const GdnGateParams& p) {
  const int64_t n = p.T * p.HV;
  for (int64_t i = int64_t(blockIdx.x) * kGateThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kGateThreads) {
    const int64_t t = i / p.HV, h = i % p.HV;
    p.beta[i] = 1.f / (1.f + expf(-p.b[t * p.b_stride + h]));
    const float x = p.a[t * p.a_stride + h] + p.dt_bias[h];
    p.g[i] = p.neg_A[h] * (x > 20.f ? x : log1pf(expf(x)));
  }
}

}  // namespace attnzoo::cuda_step
