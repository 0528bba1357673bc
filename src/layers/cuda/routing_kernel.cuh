#pragma once
// The device side of top-k routing (routing.cu launches it; routing_cuda.h has the contract): one warp per token.
// Lane l holds experts l, l + 32, ... in registers; each of the top_k rounds is a per-lane scan plus a five-step
// butterfly for the (score, lower index) maximum, and lane r keeps slot r, so the outputs leave as one coalesced
// write. Scores go through double where the CPU twins use it (exp, the sums, the divisions), so probabilities, and
// therefore the choice among near-equal experts, agree with route_softmax_top_k / route_top_k_softmax bit for bit
// in all but the rarest roundings.
#include <climits>
#include <cmath>

#include "layers/cuda/routing_cuda.h"
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo::cuda_step {

constexpr int kRouteThreads = 256;
constexpr int kWarpsPerBlock = kRouteThreads / 32;

template <class T>
struct RouteParams {
  const T* logits;
  int64_t row_stride;
  int32_t* experts;
  float* weights;
  int64_t tokens;
  int experts_per_token;  // E
  int top_k;
  bool normalize;
};

// The order the CPU's partial_sort uses: higher score first, then the lower expert index. Scores are never NaN
// here (replaced by -inf), so every lane of the butterfly settles on the same winner.
__device__ __forceinline__ bool better(float v, int i, float best_v, int best_i) {
  return v > best_v || (v == best_v && i < best_i);
}

// score <- softmax(score) over the E experts the warp holds (lane l: experts l, l + 32, ...); experts past E get 0.
// float(exp(double)) is the correctly rounded expf the CPU's libm gives; CUDA's expf may be 2 ulp off.
template <int kPerLane>
__device__ __forceinline__ void warp_softmax(float (&score)[kPerLane], int lane, int E) {
  float top = -INFINITY;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) top = fmaxf(top, score[j]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, o));
  double sum = 0;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    score[j] = lane + 32 * j < E ? float(exp(double(score[j] - top))) : 0.f;
    sum += score[j];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) score[j] = float(double(score[j]) / sum);
}

// (best, best_i) <- the warp's (score, lower index) maximum of every lane's (best, best_i).
__device__ __forceinline__ void warp_best(float& best, int& best_i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best, o);
    const int i = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (better(v, i, best, best_i)) {
      best = v;
      best_i = i;
    }
  }
}

// One round of top-k: the best expert not yet taken (bit j of taken: expert lane + 32 j), the lane's own scan
// then the warp's butterfly. best_i is INT_MAX until a lane has a candidate, so -inf scores are still chosen.
template <int kPerLane>
__device__ __forceinline__ void best_untaken(const float (&score)[kPerLane], uint32_t taken, int lane, int E,
                                             float& best, int& best_i) {
  best = -INFINITY;
  best_i = INT_MAX;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    if (e < E && !(taken >> j & 1u) && (best_i == INT_MAX || score[j] > best)) {
      best = score[j];
      best_i = e;
    }
  }
  warp_best(best, best_i);
}

template <class T, int kPerLane, RouteOrder kOrder>
__device__ __forceinline__ void route_tokens(const RouteParams<T>& p) {
  const int lane = int(threadIdx.x) % 32, E = p.experts_per_token;
  for (int64_t t = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; t < p.tokens;
       t += int64_t(gridDim.x) * kWarpsPerBlock) {
    const T* logits = p.logits + t * p.row_stride;
    float score[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      score[j] = e < E ? to_f32(logits[e]) : -INFINITY;
    }
    if constexpr (kOrder == RouteOrder::softmax_then_top_k) warp_softmax(score, lane, E);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (isnan(score[j])) score[j] = -INFINITY;

    uint32_t taken = 0;  // bit j: expert lane + 32 j is chosen
    int my_expert = 0;
    float my_score = 0.f;
    for (int r = 0; r < p.top_k; ++r) {
      float best;
      int best_i;
      best_untaken(score, taken, lane, E, best, best_i);
      if (best_i % 32 == lane) taken |= 1u << (best_i / 32);
      if (r == lane) {
        my_expert = best_i;
        my_score = best;
      }
    }

    const bool mine = lane < p.top_k;
    float weight = my_score;
    if (kOrder == RouteOrder::top_k_then_softmax || p.normalize) {
      // top_k_then_softmax: slot 0 holds the largest chosen logit; exp(l - it) in double, as route_top_k_softmax.
      const float top = __shfl_sync(0xffffffffu, my_score, 0);
      const double term = !mine ? 0.0
                          : kOrder == RouteOrder::top_k_then_softmax ? exp(double(my_score - top))
                                                                     : double(my_score);
      double sum = term;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      weight = float(term / sum);
    }
    if (mine) {
      p.experts[t * p.top_k + lane] = my_expert;
      p.weights[t * p.top_k + lane] = weight;
    }
  }
}

}  // namespace attnzoo::cuda_step
