#pragma once
// The device side of rwkv7_step_cuda.h (rwkv7_step.cu launches these; the emulator's rwkv7_step_cases.cc runs
// them against the CPU layers): the small per-token pieces of an RWKV-7 block around its projections and its
// recurrence. Row kernels (the norms, the key preparation, the output) give one warp to each (token, head) or row
// and keep f32 sums there; the element-wise ones are grid-stride loops of one thread per value. CUDA's
// IEEE-accurate expf / tanhf / sqrtf (not the __ intrinsics), so results differ from the CPU's by a few ulp of f32
// before any rounding of the outputs to bf16.
#include "layers/cuda/rwkv7_step_cuda.h"
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo::cuda_step {

constexpr int kRwkv7Threads = 256;
constexpr int kRwkv7Warps = kRwkv7Threads / 32;
constexpr float kRwkv7DecayScale = -0.6065306597126334f;  // -exp(-1/2): fla's w = kDecayScale * sigmoid(w_lora)

__device__ __forceinline__ float rwkv7_sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// LayerNorm over groups of group_dim values (layers/layer_norm.h: the block norms with groups 1): two passes, the
// mean and then the centred sum of squares, as the CPU's. x and y [rows, groups * group_dim] f32 contiguous; y may
// be x. b may be null.
struct Rwkv7NormParams {
  const float* x;
  float* y;
  const float* w;
  const float* b;
  int64_t rows, groups, group_dim;
  float eps;
};

__device__ __forceinline__ void rwkv7_layer_norm(const Rwkv7NormParams& p) {
  const int lane = int(threadIdx.x) % 32;
  const int64_t warps = int64_t(gridDim.x) * kRwkv7Warps;
  const int64_t D = p.group_dim;
  for (int64_t g = int64_t(blockIdx.x) * kRwkv7Warps + threadIdx.x / 32; g < p.rows * p.groups; g += warps) {
    const float* xg = p.x + g * D;
    float* yg = p.y + g * D;
    const int64_t c0 = (g % p.groups) * D;
    float s = 0.f;
    for (int64_t i = lane; i < D; i += 32) s += xg[i];
    const float mean = warp_sum(s) / float(D);
    float ss = 0.f;
    for (int64_t i = lane; i < D; i += 32) ss += (xg[i] - mean) * (xg[i] - mean);
    const float inv = 1.f / sqrtf(warp_sum(ss) / float(D) + p.eps);
    for (int64_t i = lane; i < D; i += 32) {
      const float v = (xg[i] - mean) * inv * p.w[c0 + i];
      yg[i] = p.b ? v + p.b[c0 + i] : v;
    }
  }
}

// fla's token shift and its lerps (fused_addcmul_rwkv7) over the packed batch: for token t of sequence s,
//   prev = t's predecessor in s, or s's shift row for s's first token;  out[m][t] = x[t] + (prev - x[t]) * mix[m]
// and s's shift row becomes its last token's x. The thread of a sequence's first token also writes its shift
// value (after reading it), so each shift value has one reader and one writer. x [T, C] f32; shift row of
// sequence s at shift + slot(s) * shift_stride, slot(s) = slots[s] (the pool's state slots; negative: a pad,
// whose shift counts as zeros and is not written) or s when slots is null; mixes [M, C] f32; out [M, T, C] bf16 (the projections' input).
struct Rwkv7ShiftParams {
  const float* x;
  float* shift;
  int64_t shift_stride;
  const int32_t* slots;
  const int32_t* seq_of;      // [T]: the sequence of each token
  const int32_t* cu_seqlens;  // [S + 1]
  const float* mixes;
  __nv_bfloat16* out;
  int64_t T, C;
  int M;
};

__device__ __forceinline__ void rwkv7_shift_mix(const Rwkv7ShiftParams& p) {
  const int64_t step = int64_t(gridDim.x) * kRwkv7Threads;
  for (int64_t e = int64_t(blockIdx.x) * kRwkv7Threads + threadIdx.x; e < p.T * p.C; e += step) {
    const int64_t t = e / p.C, i = e % p.C;
    const int32_t s = p.seq_of[t];
    const int64_t first = p.cu_seqlens[s];
    const float cur = p.x[e];
    float prev;
    if (t == first) {
      const int64_t slot = p.slots ? int64_t(p.slots[s]) : s;
      prev = 0.f;  // a padded batch row's slot -1: no shift row is read or written (its outputs are never used)
      if (slot >= 0) {
        float* sh = p.shift + slot * p.shift_stride + i;
        prev = *sh;
        *sh = p.x[(int64_t(p.cu_seqlens[s + 1]) - 1) * p.C + i];
      }
    } else {
      prev = p.x[e - p.C];
    }
    const float d = prev - cur;
    for (int m = 0; m < p.M; ++m) p.out[m * p.T * p.C + e] = __float2bfloat16_rn(cur + d * p.mixes[m * p.C + i]);
  }
}

// The block's LayerNorm fused into the token shift (rwkv7_step_cuda.h's Rwkv7TokenShift with norm_weight): a warp
// per token normalises its row and its predecessor's (a second LayerNorm of that row, which saves the launch and
// the store of h) and writes the lerps; a sequence's first token reads its shift row and writes its last token's
// normed row there. The statistics and the normed values are rwkv7_layer_norm's f32 operations in its order, so
// the lerps are the two launches' bits. shift.x is the un-normed stream; w, b [C] (b may be null).
struct Rwkv7NormShiftParams {
  Rwkv7ShiftParams shift;
  const float* w;
  const float* b;
  float eps;
};

struct Rwkv7RowNorm {
  float mean, inv;
};

__device__ __forceinline__ Rwkv7RowNorm rwkv7_row_norm(const float* x, int64_t D, float eps, int lane) {
  float s = 0.f;
  for (int64_t i = lane; i < D; i += 32) s += x[i];
  const float mean = warp_sum(s) / float(D);
  float ss = 0.f;
  for (int64_t i = lane; i < D; i += 32) ss += (x[i] - mean) * (x[i] - mean);
  return {mean, 1.f / sqrtf(warp_sum(ss) / float(D) + eps)};
}

__device__ __forceinline__ void rwkv7_norm_shift_mix(const Rwkv7NormShiftParams& q) {
  const Rwkv7ShiftParams& p = q.shift;
  const int lane = int(threadIdx.x) % 32;
  const int64_t warps = int64_t(gridDim.x) * kRwkv7Warps, C = p.C;
  auto normed = [&](const float* x, const Rwkv7RowNorm& n, int64_t i) {
    const float v = (x[i] - n.mean) * n.inv * q.w[i];
    return q.b ? v + q.b[i] : v;
  };
  for (int64_t t = int64_t(blockIdx.x) * kRwkv7Warps + threadIdx.x / 32; t < p.T; t += warps) {
    const int32_t s = p.seq_of[t];
    const bool first = t == p.cu_seqlens[s];
    const float* xt = p.x + t * C;
    // The predecessor's row, or for a first token the sequence's last row (what its shift row becomes).
    const float* xp = first ? p.x + (int64_t(p.cu_seqlens[s + 1]) - 1) * C : xt - C;
    const Rwkv7RowNorm nt = rwkv7_row_norm(xt, C, q.eps, lane), np = rwkv7_row_norm(xp, C, q.eps, lane);
    float* sh = nullptr;  // a pad's slot -1: zeros shifted in, nothing written (its outputs are never used)
    if (first) {
      const int64_t slot = p.slots ? int64_t(p.slots[s]) : s;
      if (slot >= 0) sh = p.shift + slot * p.shift_stride;
    }
    for (int64_t i = lane; i < C; i += 32) {
      const float cur = normed(xt, nt, i);
      float prev;
      if (first) {
        prev = sh ? sh[i] : 0.f;
        if (sh) sh[i] = normed(xp, np, i);
      } else {
        prev = normed(xp, np, i);
      }
      const float d = prev - cur;
      for (int m = 0; m < p.M; ++m)
        p.out[m * p.T * C + t * C + i] = __float2bfloat16_rn(cur + d * p.mixes[m * C + i]);
    }
  }
}

// One or two runs of values, each with its activation: the second (n2 > 0) lets the w and g LoRAs' middles go in
// one launch.
template <class Out>
struct Rwkv7ActParams {
  const float* x;
  Out* y;  // may be x (Out float)
  int64_t n;
  Rwkv7Activation act;
  const float* x2 = nullptr;
  Out* y2 = nullptr;
  int64_t n2 = 0;
  Rwkv7Activation act2 = Rwkv7Activation::none;
};

template <class Out>
__device__ __forceinline__ void rwkv7_activate(const Rwkv7ActParams<Out>& p) {
  const int64_t step = int64_t(gridDim.x) * kRwkv7Threads;
  for (int64_t e = int64_t(blockIdx.x) * kRwkv7Threads + threadIdx.x; e < p.n + p.n2; e += step) {
    const bool second = e >= p.n;
    const int64_t at = second ? e - p.n : e;
    float v = second ? p.x2[at] : p.x[at];
    switch (second ? p.act2 : p.act) {
      case Rwkv7Activation::none: break;
      case Rwkv7Activation::tanh: v = tanhf(v); break;
      case Rwkv7Activation::sigmoid: v = rwkv7_sigmoid(v); break;
      case Rwkv7Activation::decay: v = kRwkv7DecayScale * rwkv7_sigmoid(v); break;
      case Rwkv7Activation::relu2: v = v > 0.f ? v * v : 0.f; break;
    }
    (second ? p.y2 : p.y)[at] = from_f32<Out>(v);
  }
}

// What the time mix does between its projections and the recurrence (layers/rwkv7_time_mix.cc), per (token, head):
//   a = sigmoid(a_raw);  kn = l2norm(k * k_k) (fused: rsqrt(sum + 1e-6), else 1 / max(norm, 1e-12))
//   k <- k * (1 + (a - 1) * k_a);  a_rec = -kn;  b = kn * a      (the recurrence's a and b)
//   v <- v + sigmoid(v_gate) * (v_first - v) where v_gate is given (layers after the first), else v_first = v.
// k, a_raw (b written over it), a_rec [T, H * K]; k_k, k_a [H * K]; v, v_first, v_gate [T, H * V]; all f32.
struct Rwkv7KeyParams {
  float* w;  // null: no decay here (the runner's w after its LoRA: w <- kRwkv7DecayScale * sigmoid(w))
  float* k;
  float* a;  // in: a_raw; out: b
  float* a_rec;
  const float* k_k;
  const float* k_a;
  float* v;
  float* v_first;
  const float* v_gate;  // null: the first layer
  int64_t T, H, K, V;
  bool fused_l2norm;
};

__device__ __forceinline__ void rwkv7_prepare_keys(const Rwkv7KeyParams& p) {
  const int lane = int(threadIdx.x) % 32;
  const int64_t warps = int64_t(gridDim.x) * kRwkv7Warps;
  for (int64_t th = int64_t(blockIdx.x) * kRwkv7Warps + threadIdx.x / 32; th < p.T * p.H; th += warps) {
    const int64_t kb = th * p.K, vb = th * p.V, c0 = (th % p.H) * p.K;
    float ss = 0.f;
    for (int64_t i = lane; i < p.K; i += 32) {
      const float kk = p.k[kb + i] * p.k_k[c0 + i];
      ss += kk * kk;
    }
    ss = warp_sum(ss);
    const float inv = p.fused_l2norm ? 1.f / sqrtf(ss + 1e-6f) : 1.f / fmaxf(sqrtf(ss), 1e-12f);
    for (int64_t i = lane; i < p.K; i += 32) {
      const int64_t j = kb + i;
      const float kv = p.k[j], kn = kv * p.k_k[c0 + i] * inv, ai = rwkv7_sigmoid(p.a[j]);
      p.k[j] = kv * (1.f + (ai - 1.f) * p.k_a[c0 + i]);
      p.a[j] = kn * ai;
      p.a_rec[j] = -kn;
      if (p.w) p.w[j] = kRwkv7DecayScale * rwkv7_sigmoid(p.w[j]);
    }
    for (int64_t i = lane; i < p.V; i += 32) {
      const int64_t j = vb + i;
      if (p.v_gate) {
        p.v[j] += rwkv7_sigmoid(p.v_gate[j]) * (p.v_first[j] - p.v[j]);
      } else {
        p.v_first[j] = p.v[j];
      }
    }
  }
}

// The time mix's output before o_proj, per (token, head): o's group norm (weight and bias [H * V], eps), plus the
// bonus sum_K(r * k * r_k) * v, times the gate g:  out = (group_norm(o) + bonus * v) * g, rounded to bf16.
// o, v, g [T, H * V]; r, k [T, H * K]; r_k [H * K]; f32 but out.
struct Rwkv7OutputParams {
  const float* o;
  const float* norm_w;
  const float* norm_b;
  const float* r;
  const float* k;
  const float* r_k;
  const float* v;
  const float* g;
  __nv_bfloat16* out;
  int64_t T, H, K, V;
  float eps;
};

__device__ __forceinline__ void rwkv7_output(const Rwkv7OutputParams& p) {
  const int lane = int(threadIdx.x) % 32;
  const int64_t warps = int64_t(gridDim.x) * kRwkv7Warps;
  for (int64_t th = int64_t(blockIdx.x) * kRwkv7Warps + threadIdx.x / 32; th < p.T * p.H; th += warps) {
    const int64_t kb = th * p.K, vb = th * p.V, ck = (th % p.H) * p.K, cv = (th % p.H) * p.V;
    float bonus = 0.f, s = 0.f;
    for (int64_t i = lane; i < p.K; i += 32) bonus += p.r[kb + i] * p.k[kb + i] * p.r_k[ck + i];
    for (int64_t i = lane; i < p.V; i += 32) s += p.o[vb + i];
    bonus = warp_sum(bonus);
    const float mean = warp_sum(s) / float(p.V);
    float ss = 0.f;
    for (int64_t i = lane; i < p.V; i += 32) ss += (p.o[vb + i] - mean) * (p.o[vb + i] - mean);
    const float inv = 1.f / sqrtf(warp_sum(ss) / float(p.V) + p.eps);
    for (int64_t i = lane; i < p.V; i += 32) {
      const int64_t j = vb + i;
      const float n = (p.o[j] - mean) * inv * p.norm_w[cv + i] + p.norm_b[cv + i];
      p.out[j] = __float2bfloat16_rn((n + bonus * p.v[j]) * p.g[j]);
    }
  }
}

}  // namespace attnzoo::cuda_step
