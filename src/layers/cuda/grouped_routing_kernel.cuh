#pragma once
// The device side of DeepSeek's grouped routing (grouped_routing.cu launches it; routing_cuda.h has the contract),
// laid out as top-k routing (routing_kernel.cuh): one warp per token, lane l holding experts l, l + 32, ... with
// their scores s and choice scores c = s + bias in registers. Each group's score is a warp-wide merge of per-lane
// (best, second) pairs, and lane g keeps group g's; topk_group rounds of the (score, lower index) butterfly keep
// groups, the others' experts drop to -inf, and top_k rounds pick the experts, lane r keeping slot r and the chosen
// expert's s. Scores go through double where route_grouped_top_k uses it: float(exp(double)) is the correctly
// rounded expf the CPU's libm gives.
#include <climits>
#include <cmath>

#include "layers/cuda/routing_cuda.h"
#include "layers/cuda/routing_kernel.cuh"
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo::cuda_step {

template <class T>
struct GroupedRouteParams {
  const T* logits;
  int64_t row_stride;
  const float* bias;  // [E], or null for none
  int32_t* experts;
  float* weights;
  int64_t tokens;
  int experts_per_token, top_k, n_group, topk_group;  // E, ...
  bool softmax, group_max, normalize;
  float scaling;
  double epsilon;
};

template <class T, int kPerLane>
__device__ __forceinline__ void route_grouped_tokens(const GroupedRouteParams<T>& p) {
  const int lane = int(threadIdx.x) % 32, E = p.experts_per_token, per_group = E / p.n_group;
  for (int64_t t = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; t < p.tokens;
       t += int64_t(gridDim.x) * kWarpsPerBlock) {
    const T* logits = p.logits + t * p.row_stride;
    float s[kPerLane], c[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      s[j] = e < E ? to_f32(logits[e]) : -INFINITY;
    }
    if (p.softmax) {
      warp_softmax(s, lane, E);
    } else {
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) s[j] = lane + 32 * j < E ? 1.f / (1.f + float(exp(-double(s[j])))) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      c[j] = e < E ? s[j] + (p.bias ? p.bias[e] : 0.f) : -INFINITY;
    }

    // Group scores: the best and second-best c of each group (a multiset, as the CPU's scan keeps them).
    float my_group = -INFINITY;  // lane g < n_group: group g's score
    for (int g = 0; g < p.n_group; ++g) {
      float b1 = -INFINITY, b2 = -INFINITY;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int e = lane + 32 * j;
        if (e < E && e / per_group == g) {
          if (c[j] > b1) {
            b2 = b1;
            b1 = c[j];
          } else if (c[j] > b2) {
            b2 = c[j];
          }
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float o1 = __shfl_xor_sync(0xffffffffu, b1, o), o2 = __shfl_xor_sync(0xffffffffu, b2, o);
        b2 = fmaxf(fminf(b1, o1), fmaxf(b2, o2));
        b1 = fmaxf(b1, o1);
      }
      if (lane == g) my_group = per_group >= 2 && !p.group_max ? b1 + b2 : b1;
    }
    uint32_t kept = 0;  // bit g: group g stays
    for (int r = 0; r < p.topk_group; ++r) {
      const bool open = lane < p.n_group && !(kept >> lane & 1u);
      float best = open ? my_group : -INFINITY;
      int best_i = open ? lane : INT_MAX;
      warp_best(best, best_i);
      kept |= 1u << best_i;
    }
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e < E && !(kept >> (e / per_group) & 1u)) c[j] = -INFINITY;
    }

    uint32_t taken = 0;  // bit j: expert lane + 32 j is chosen
    int my_expert = 0;
    float my_s = 0.f;
    for (int r = 0; r < p.top_k; ++r) {
      float best;
      int best_i;
      best_untaken(c, taken, lane, E, best, best_i);
      float owned = 0.f;  // the winner's s, from the lane that holds it
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (lane + 32 * j == best_i) owned = s[j];
      const float chosen = __shfl_sync(0xffffffffu, owned, best_i % 32);
      if (best_i % 32 == lane) taken |= 1u << (best_i / 32);
      if (r == lane) {
        my_expert = best_i;
        my_s = chosen;
      }
    }

    const bool mine = lane < p.top_k;
    double sum = mine ? double(my_s) : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const double denom = p.normalize ? sum + p.epsilon : 1.0;
    if (mine) {
      p.experts[t * p.top_k + lane] = my_expert;
      p.weights[t * p.top_k + lane] = float(double(my_s) / denom * double(p.scaling));
    }
  }
}

}  // namespace attnzoo::cuda_step
