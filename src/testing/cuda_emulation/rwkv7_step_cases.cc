// RWKV-7's per-token kernels (layers/cuda/rwkv7_step_kernel.cuh) under the CTA emulator against the CPU layers:
// the LayerNorm against layers/layer_norm.h's (with and without bias, per group, in place), the token shift and
// its lerps against rwkv7_state.h's rwkv7_token_shift over a ragged batch addressed through pool slots (one-token
// and empty sequences, the shift rows advanced), the activations, and the time mix's key preparation (with the
// decay after w's LoRA fused in) and output against rwkv7_time_mix.cc's loops written out the same way. The block
// norm fused into the token shift is rwkv7_norm_shift_cases.cc's. Grids capped so their loops take several rounds;
// outputs start as NaN bytes and nothing past them is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/convert.h"
#include "layers/batch.h"
#include "layers/cuda/rwkv7_step_kernel.cuh"
#include "layers/layer_norm.h"
#include "layers/rwkv7_state.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/rwkv7_shift_batch.h"
#include "testing/cuda_emulation/strided_operand.h"

namespace attnzoo {
namespace {
using namespace cuda_step;
using cuda_emulation::ShiftBatch;
using cuda_emulation::StridedOperand;
using cuda_emulation::bf16_round;
using cuda_emulation::fill_nan;
using cuda_emulation::values;

// One bf16 ulp of the reference (kernel and CPU may round either way at a tie's neighbourhood) plus slack for
// the f32 sums' order.
void expect_bf16(float got, float want, const std::string& what) {
  EXPECT_NEAR(got, bf16_round(want), std::fabs(want) * (1.f / 128) + 1e-5f) << what;
}

void check_layer_norm(int64_t rows, int64_t groups, int64_t group_dim, bool bias, bool in_place, unsigned blocks) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " groups " + std::to_string(groups) + " dim " +
               std::to_string(group_dim) + (bias ? " bias" : "") + (in_place ? " in place" : ""));
  const int64_t D = groups * group_dim;
  StridedOperand x(DType::f32, {rows, D}, 1, {}, 3.f), w(DType::f32, {D}, 2), b(DType::f32, {D}, 3),
      y(DType::f32, {rows, D}, 4);
  for (int64_t i = 0; i < rows * D; ++i) x.set(i, x.at(i) + 5.f);  // a mean far from 0
  x.upload();
  if (!in_place) fill_nan(y);
  const std::vector<float> xh = values(x), wh = values(w), bh = values(b);
  std::vector<float> want(xh.size());
  const float eps = 1e-5f * float(group_dim);
  layer_norm(xh.data(), rows, groups, group_dim, wh.data(), bias ? bh.data() : nullptr, eps, want.data());
  StridedOperand& out = in_place ? x : y;
  const Rwkv7NormParams p{x.device_ptr<const float>(), out.device_ptr<float>(), w.device_ptr<const float>(),
                          bias ? b.device_ptr<const float>() : nullptr, rows, groups, group_dim, eps};
  cuda_emulation::launch(dim3(blocks), kRwkv7Threads, 0, [&](unsigned char*) { rwkv7_layer_norm(p); });
  out.download();
  for (int64_t i = 0; i < rows * D; ++i)
    EXPECT_NEAR(out.at(i), want[size_t(i)], 2e-5f * std::fabs(want[size_t(i)]) + 2e-5f) << i;
  EXPECT_TRUE(out.outside_untouched());
}

TEST(EmulatedRwkv7Step, LayerNormMatchesTheCpus) {
  check_layer_norm(37, 1, 96, true, false, 2);   // block norms: 37 rows over 16 warps, three rounds
  check_layer_norm(5, 1, 200, false, true, 1);   // norm_bias false, in place (the pre_norm on the stream)
  check_layer_norm(9, 4, 64, true, false, 3);    // the time mix's group norm: one group per head
  check_layer_norm(3, 3, 17, true, true, 1);     // odd group widths
}

// A ragged batch of `lens` sequences at pool slots `slots` (-1: a pad; shift rows `stride` floats apart, the row
// at `offset`).
void check_shift(const std::vector<int32_t>& lens, const std::vector<int32_t>& slots, int64_t C, int M,
                 int64_t stride, int64_t offset, unsigned blocks) {
  SCOPED_TRACE("C " + std::to_string(C) + " M " + std::to_string(M) + " seqs " + std::to_string(lens.size()));
  const ShiftBatch sb(lens, slots);
  const int64_t T = sb.T;
  StridedOperand x(DType::f32, {T, C}, 1), mixes(DType::f32, {int64_t(M), C}, 2),
      pool(DType::f32, {sb.pool_rows * stride}, 3), out(DType::bf16, {int64_t(M), T, C}, 4);
  fill_nan(out);

  // The CPU: deltas from rwkv7_token_shift over a host copy of the pool, then the lerps as the time mix takes them.
  const std::vector<float> xh = values(x), mh = values(mixes);
  std::vector<float> pool_h = values(pool);
  const std::vector<float> delta = sb.deltas(xh.data(), C, pool_h, stride, offset);

  const Rwkv7ShiftParams p{x.device_ptr<const float>(), pool.device_ptr<float>() + offset, stride, sb.slots_d,
                           sb.seq_of, sb.cu, mixes.device_ptr<const float>(), out.device_ptr<__nv_bfloat16>(), T, C, M};
  cuda_emulation::launch(dim3(blocks), kRwkv7Threads, 0, [&](unsigned char*) { rwkv7_shift_mix(p); });
  out.download();
  pool.download();
  for (int m = 0; m < M; ++m)
    for (int64_t e = 0; e < T * C; ++e)
      expect_bf16(out.at(m * T * C + e), xh[size_t(e)] + delta[size_t(e)] * mh[size_t(m * C + e % C)],
                  "mix " + std::to_string(m) + " at " + std::to_string(e));
  for (int64_t i = 0; i < sb.pool_rows * stride; ++i) EXPECT_EQ(pool.at(i), pool_h[size_t(i)]) << "pool float " << i;
  EXPECT_TRUE(out.outside_untouched());
}

TEST(EmulatedRwkv7Step, TokenShiftMatchesTheCpus) {
  // Prefill pieces beside a decode token and an empty sequence, the time mix's six lerps, slots out of order.
  check_shift({5, 1, 0, 9}, {3, 0, 5, 1}, 48, 6, 130, 0, 2);
  check_shift({1, 1, 1}, {2, 0, 1}, 33, 1, 80, 40, 1);   // decode: the channel mix's shift row past the time mix's
  check_shift({300}, {0}, 16, 1, 40, 16, 3);             // one long sequence: 4800 values over 768 threads
  check_shift({1, 1, 1, 1}, {1, -1, 0, -1}, 40, 6, 90, 0, 1);  // a decode step padded to a bucket (pads' slot -1)
}

TEST(EmulatedRwkv7Step, ActivationsMatchTheCpus) {
  const int64_t n = 1000;
  StridedOperand x(DType::f32, {n}, 1, {}, 4.f);
  const std::vector<float> xh = values(x);
  const std::pair<Rwkv7Activation, float (*)(float)> acts[] = {
      {Rwkv7Activation::none, [](float v) { return v; }},
      {Rwkv7Activation::tanh, [](float v) { return std::tanh(v); }},
      {Rwkv7Activation::sigmoid, [](float v) { return 1.f / (1.f + std::exp(-v)); }},
      {Rwkv7Activation::decay, [](float v) { return -0.6065306597126334f / (1.f + std::exp(-v)); }},
      {Rwkv7Activation::relu2, [](float v) { return v > 0.f ? v * v : 0.f; }}};
  for (const auto& [act, fn] : acts) {
    SCOPED_TRACE("activation " + std::to_string(int(act)));
    StridedOperand y32(DType::f32, {n}, 2), y16(DType::bf16, {n}, 3);
    fill_nan(y32), fill_nan(y16);
    const Rwkv7ActParams<float> p32{x.device_ptr<const float>(), y32.device_ptr<float>(), n, act};
    const Rwkv7ActParams<__nv_bfloat16> p16{x.device_ptr<const float>(), y16.device_ptr<__nv_bfloat16>(), n, act};
    cuda_emulation::launch(dim3(2), kRwkv7Threads, 0, [&](unsigned char*) { rwkv7_activate(p32); });
    cuda_emulation::launch(dim3(1), kRwkv7Threads, 0, [&](unsigned char*) { rwkv7_activate(p16); });
    y32.download(), y16.download();
    for (int64_t i = 0; i < n; ++i) {
      const float want = fn(xh[size_t(i)]);
      EXPECT_NEAR(y32.at(i), want, 4e-7f * std::fabs(want) + 1e-7f) << i;
      expect_bf16(y16.at(i), want, std::to_string(i));
    }
    EXPECT_TRUE(y32.outside_untouched());
    EXPECT_TRUE(y16.outside_untouched());
  }
  // Two runs in one launch (the w and g LoRAs' middles): tanh over x's first 700 values, sigmoid over the rest.
  const int64_t n0 = 700, n1 = n - n0;
  StridedOperand a16(DType::bf16, {n0}, 5), b16(DType::bf16, {n1}, 6);
  fill_nan(a16), fill_nan(b16);
  const Rwkv7ActParams<__nv_bfloat16> pair{x.device_ptr<const float>(), a16.device_ptr<__nv_bfloat16>(), n0,
                                           Rwkv7Activation::tanh, x.device_ptr<const float>() + n0,
                                           b16.device_ptr<__nv_bfloat16>(), n1, Rwkv7Activation::sigmoid};
  cuda_emulation::launch(dim3(1), kRwkv7Threads, 0, [&](unsigned char*) { rwkv7_activate(pair); });
  a16.download(), b16.download();
  for (int64_t i = 0; i < n0; ++i) expect_bf16(a16.at(i), std::tanh(xh[size_t(i)]), "tanh " + std::to_string(i));
  for (int64_t i = 0; i < n1; ++i)
    expect_bf16(b16.at(i), 1.f / (1.f + std::exp(-xh[size_t(n0 + i)])), "sigmoid " + std::to_string(i));
  EXPECT_TRUE(a16.outside_untouched());
  EXPECT_TRUE(b16.outside_untouched());
}

void check_keys(int64_t T, int64_t H, int64_t K, int64_t V, bool first_layer, bool fused, unsigned blocks) {
  SCOPED_TRACE("T " + std::to_string(T) + " H " + std::to_string(H) + " K " + std::to_string(K) + " V " +
               std::to_string(V) + (first_layer ? " first" : "") + (fused ? " fused" : ""));
  const int64_t C = H * K, Dv = H * V;
  StridedOperand k(DType::f32, {T, C}, 1), a(DType::f32, {T, C}, 2, {}, 2.f), a_rec(DType::f32, {T, C}, 3),
      k_k(DType::f32, {C}, 4), k_a(DType::f32, {C}, 5), v(DType::f32, {T, Dv}, 6), v_first(DType::f32, {T, Dv}, 7),
      v_gate(DType::f32, {T, Dv}, 8), w(DType::f32, {T, C}, 9, {}, 3.f);
  fill_nan(a_rec);
  if (first_layer) fill_nan(v_first);
  std::vector<float> kh = values(k), ah = values(a), kr(kh.size()), vh = values(v), vf = values(v_first);
  const std::vector<float> kk_w = values(k_k), ka_w = values(k_a), vg = values(v_gate);
  std::vector<float> wh = values(w);  // the decay after w's LoRA, fused into this launch
  for (float& e : wh) e = -0.6065306597126334f / (1.f + std::exp(-e));
  // rwkv7_time_mix.cc's loop, a = sigmoid(a) first as its forward does.
  for (float& e : ah) e = 1.f / (1.f + std::exp(-e));
  for (int64_t th = 0; th < T * H; ++th) {
    const int64_t base = th * K, c0 = (th % H) * K;
    float ss = 0.f;
    std::vector<float> kk(static_cast<size_t>(K));
    for (int64_t i = 0; i < K; ++i) {
      kk[size_t(i)] = kh[size_t(base + i)] * kk_w[size_t(c0 + i)];
      ss += kk[size_t(i)] * kk[size_t(i)];
    }
    const float inv = fused ? 1.f / std::sqrt(ss + 1e-6f) : 1.f / std::max(std::sqrt(ss), 1e-12f);
    for (int64_t i = 0; i < K; ++i) {
      const size_t j = size_t(base + i);
      const float kn = kk[size_t(i)] * inv, ai = ah[j];
      kh[j] = kh[j] * (1.f + (ai - 1.f) * ka_w[size_t(c0 + i)]);
      ah[j] = kn * ai;
      kr[j] = -kn;
    }
  }
  if (first_layer) {
    vf = vh;
  } else {
    for (size_t i = 0; i < vh.size(); ++i) vh[i] += 1.f / (1.f + std::exp(-vg[i])) * (vf[i] - vh[i]);
  }
  const Rwkv7KeyParams p{w.device_ptr<float>(), k.device_ptr<float>(), a.device_ptr<float>(), a_rec.device_ptr<float>(),
                         k_k.device_ptr<const float>(), k_a.device_ptr<const float>(), v.device_ptr<float>(),
                         v_first.device_ptr<float>(), first_layer ? nullptr : v_gate.device_ptr<const float>(),
                         T, H, K, V, fused};
  cuda_emulation::launch(dim3(blocks), kRwkv7Threads, 0, [&](unsigned char*) { rwkv7_prepare_keys(p); });
  for (StridedOperand* t : {&k, &a, &a_rec, &v, &v_first, &w}) t->download();
  auto near = [](float got, float want) { return std::fabs(got - want) <= 2e-6f * std::fabs(want) + 1e-6f; };
  for (int64_t i = 0; i < T * C; ++i) {
    EXPECT_PRED2(near, k.at(i), kh[size_t(i)]) << "k " << i;
    EXPECT_PRED2(near, a.at(i), ah[size_t(i)]) << "b " << i;
    EXPECT_PRED2(near, a_rec.at(i), kr[size_t(i)]) << "a_rec " << i;
    EXPECT_PRED2(near, w.at(i), wh[size_t(i)]) << "w " << i;
  }
  for (int64_t i = 0; i < T * Dv; ++i) {
    EXPECT_PRED2(near, v.at(i), vh[size_t(i)]) << "v " << i;
    EXPECT_PRED2(near, v_first.at(i), vf[size_t(i)]) << "v_first " << i;
  }
  for (StridedOperand* t : {&k, &a, &a_rec, &v, &v_first, &w}) EXPECT_TRUE(t->outside_untouched());
}

TEST(EmulatedRwkv7Step, KeyPreparationMatchesTheTimeMix) {
  check_keys(7, 3, 64, 64, true, true, 1);     // the first layer sets v_first; 21 heads over 8 warps
  check_keys(5, 2, 64, 32, false, true, 2);    // later layers mix v towards v_first; K != V
  check_keys(3, 4, 40, 72, false, false, 1);   // F.normalize's l2norm; widths off the warp
}

void check_output(int64_t T, int64_t H, int64_t K, int64_t V, unsigned blocks) {
  SCOPED_TRACE("T " + std::to_string(T) + " H " + std::to_string(H) + " K " + std::to_string(K) + " V " +
               std::to_string(V));
  const int64_t C = H * K, Dv = H * V;
  StridedOperand o(DType::f32, {T, Dv}, 1, {}, 2.f), nw(DType::f32, {Dv}, 2), nb(DType::f32, {Dv}, 3),
      r(DType::f32, {T, C}, 4), k(DType::f32, {T, C}, 5), r_k(DType::f32, {C}, 6), v(DType::f32, {T, Dv}, 7),
      g(DType::f32, {T, Dv}, 8), out(DType::bf16, {T, Dv}, 9);
  fill_nan(out);
  const float eps = float(K) * 1e-5f;
  // rwkv7_time_mix.cc's tail: the group norm (layer_norm per head), then the bonus and the gate.
  const std::vector<float> oh = values(o), nwh = values(nw), nbh = values(nb), rh = values(r), kh = values(k),
                           rkh = values(r_k), vh = values(v), gh = values(g);
  std::vector<float> want(oh.size());
  layer_norm(oh.data(), T, H, V, nwh.data(), nbh.data(), eps, want.data());
  for (int64_t th = 0; th < T * H; ++th) {
    const int64_t kb = th * K, vb = th * V, c0 = (th % H) * K;
    float bonus = 0.f;
    for (int64_t i = 0; i < K; ++i) bonus += rh[size_t(kb + i)] * kh[size_t(kb + i)] * rkh[size_t(c0 + i)];
    for (int64_t j = 0; j < V; ++j)
      want[size_t(vb + j)] = (want[size_t(vb + j)] + bonus * vh[size_t(vb + j)]) * gh[size_t(vb + j)];
  }
  const Rwkv7OutputParams p{o.device_ptr<const float>(), nw.device_ptr<const float>(), nb.device_ptr<const float>(),
                            r.device_ptr<const float>(), k.device_ptr<const float>(), r_k.device_ptr<const float>(),
                            v.device_ptr<const float>(), g.device_ptr<const float>(),
                            out.device_ptr<__nv_bfloat16>(), T, H, K, V, eps};
  cuda_emulation::launch(dim3(blocks), kRwkv7Threads, 0, [&](unsigned char*) { rwkv7_output(p); });
  out.download();
  for (int64_t i = 0; i < T * Dv; ++i) expect_bf16(out.at(i), want[size_t(i)], "out " + std::to_string(i));
  EXPECT_TRUE(out.outside_untouched());
}

TEST(EmulatedRwkv7Step, OutputMatchesTheTimeMix) {
  check_output(6, 3, 64, 64, 1);   // 18 heads over 8 warps: three rounds
  check_output(4, 2, 64, 96, 2);   // V != K
  check_output(3, 5, 24, 40, 1);   // widths off the warp
}

}  // namespace
}  // namespace attnzoo
