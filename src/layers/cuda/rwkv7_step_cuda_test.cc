// RWKV-7's per-token launchers (rwkv7_step_cuda.h): their refusals (host-only, run without a GPU), and on a GPU the
// LayerNorm and the token shift over a ragged batch in pool slots against the CPU layers. Every kernel also runs
// under the emulator against the CPU layers (testing/cuda_emulation/rwkv7_step_cases.cc); the whole block is
// models/cuda/rwkv7_cuda_runner_test.cc's.
#include "layers/cuda/rwkv7_step_cuda.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/batch.h"
#include "layers/cuda/step_test_util.h"
#include "layers/layer_norm.h"
#include "layers/rwkv7_state.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::DeviceOperand;
using testing::expect_error;
using testing::fake_cuda_view;

TEST(Rwkv7StepCuda, RefusesNamingTheArgument) {
  const TensorView x = fake_cuda_view(DType::f32, {4, 64}), w = fake_cuda_view(DType::f32, {64});
  EXPECT_NO_THROW(check_rwkv7_layer_norm_cuda(x, w, w, x, 1e-5f));
  EXPECT_NO_THROW(check_rwkv7_layer_norm_cuda(x, w, TensorView{}, x, 1e-5f));
  TensorView host = x;
  host.device = Device::cpu();
  expect_error<ArgumentError>([&] { rwkv7_layer_norm_cuda(host, w, w, x, 1e-5f); }, "x: lives on cpu");
  expect_error<DTypeError>([&] { check_rwkv7_layer_norm_cuda(x, w, w, fake_cuda_view(DType::bf16, {4, 64}), 0.f); },
                           "y: expected float32");
  expect_error<ArgumentError>([&] { check_rwkv7_layer_norm_cuda(x, fake_cuda_view(DType::f32, {63}), w, x, 0.f); },
                              "weight: expected 64 contiguous values");
  expect_error<ArgumentError>([&] { check_rwkv7_layer_norm_cuda(x, w, w, x, NAN); }, "eps: must be finite");

  Rwkv7TokenShift s;
  s.x = x;
  s.mixes = fake_cuda_view(DType::f32, {6, 64});
  s.out = fake_cuda_view(DType::bf16, {6, 4, 64});
  float some_floats[1];
  int32_t some_ints[1];
  s.shift = some_floats, s.shift_stride = 200, s.seq_of = some_ints, s.cu_seqlens = some_ints;
  EXPECT_NO_THROW(check_rwkv7_shift_mix_cuda(s));
  Rwkv7TokenShift bad = s;
  bad.out = fake_cuda_view(DType::bf16, {1, 4, 64});
  expect_error<ArgumentError>([&] { check_rwkv7_shift_mix_cuda(bad); }, "out: expected 1536 contiguous values");
  bad = s;
  bad.shift_stride = 63;
  expect_error<ArgumentError>([&] { check_rwkv7_shift_mix_cuda(bad); }, "shift_stride: 63 is shorter");
  bad = s;
  bad.cu_seqlens = nullptr;
  expect_error<ArgumentError>([&] { check_rwkv7_shift_mix_cuda(bad); }, "cu_seqlens: null");
  Rwkv7TokenShift normed = s;  // the block norm fused in
  normed.norm_weight = normed.norm_bias = w, normed.eps = 1e-5f;
  EXPECT_NO_THROW(check_rwkv7_shift_mix_cuda(normed));
  bad = normed;
  bad.norm_weight = fake_cuda_view(DType::f32, {63});
  expect_error<ArgumentError>([&] { check_rwkv7_shift_mix_cuda(bad); }, "norm_weight: expected 64 contiguous");
  bad = normed;
  bad.eps = -1.f;
  expect_error<ArgumentError>([&] { check_rwkv7_shift_mix_cuda(bad); }, "eps: must be finite");
  bad = s;
  bad.norm_bias = w;
  expect_error<ArgumentError>([&] { check_rwkv7_shift_mix_cuda(bad); }, "norm_bias: given without norm_weight");

  EXPECT_NO_THROW(check_rwkv7_activate_cuda(x, fake_cuda_view(DType::bf16, {4, 64})));
  expect_error<DTypeError>([&] { check_rwkv7_activate_cuda(x, fake_cuda_view(DType::f16, {4, 64})); },
                           "y: expected float32 or bfloat16");

  Rwkv7Keys k;
  k.k = k.a = k.a_rec = fake_cuda_view(DType::f32, {3, 128});
  k.k_k = k.k_a = fake_cuda_view(DType::f32, {128});
  k.v = k.v_first = fake_cuda_view(DType::f32, {3, 96});
  k.heads = 2;
  EXPECT_NO_THROW(check_rwkv7_prepare_keys_cuda(k));
  Rwkv7Keys bad_k = k;
  bad_k.heads = 5;
  expect_error<ArgumentError>([&] { check_rwkv7_prepare_keys_cuda(bad_k); }, "k: width 128 does not split into 5");
  bad_k = k;
  bad_k.v_gate = fake_cuda_view(DType::f32, {3, 64});
  expect_error<ArgumentError>([&] { check_rwkv7_prepare_keys_cuda(bad_k); }, "v_gate: expected 288 contiguous");
  bad_k = k;
  bad_k.w = fake_cuda_view(DType::f32, {3, 96});
  expect_error<ArgumentError>([&] { check_rwkv7_prepare_keys_cuda(bad_k); }, "w: expected 384 contiguous");

  Rwkv7Output o;
  o.o = o.v = o.g = fake_cuda_view(DType::f32, {3, 96});
  o.r = o.k = fake_cuda_view(DType::f32, {3, 128});
  o.r_k = fake_cuda_view(DType::f32, {128});
  o.norm_weight = o.norm_bias = fake_cuda_view(DType::f32, {96});
  o.out = fake_cuda_view(DType::bf16, {3, 96});
  o.heads = 2;
  EXPECT_NO_THROW(check_rwkv7_output_cuda(o));
  Rwkv7Output bad_o = o;
  bad_o.out = fake_cuda_view(DType::f32, {3, 96});
  expect_error<DTypeError>([&] { check_rwkv7_output_cuda(bad_o); }, "out: expected bfloat16");
  bad_o = o;
  bad_o.norm_bias = TensorView{};
  expect_error<ArgumentError>([&] { check_rwkv7_output_cuda(bad_o); }, "norm_bias: ");
}

#if ATTNZOO_WITH_CUDA

TEST(Rwkv7StepCuda, LayerNormAndTokenShiftMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  const int64_t C = 96, stride = 250;
  Batch batch;
  for (int32_t n : {7, 1, 40}) batch.cu_seqlens.push_back(batch.cu_seqlens.back() + n);
  const int64_t T = batch.cu_seqlens.back();
  batch.tokens.assign(size_t(T), 0);
  batch.state_slots = {4, 0, 2};
  std::vector<int32_t> meta;
  for (int32_t s = 0; s < 3; ++s) meta.insert(meta.end(), size_t(batch.seq_len(s)), s);
  meta.insert(meta.end(), batch.cu_seqlens.begin(), batch.cu_seqlens.end());
  meta.insert(meta.end(), batch.state_slots.begin(), batch.state_slots.end());
  DeviceBuffer meta_d(Device::cuda(), meta.size() * 4);
  meta_d.upload(meta.data(), meta.size() * 4);

  DeviceOperand x(DType::f32, {T, C}, 1, {}, 2.f), w(DType::f32, {C}, 2), b(DType::f32, {C}, 3),
      h(DType::f32, {T, C}, 4), mixes(DType::f32, {6, C}, 5), pool(DType::f32, {5 * stride}, 6),
      out(DType::bf16, {6, T, C}, 7);
  rwkv7_layer_norm_cuda(x.device_view(), w.device_view(), b.device_view(), h.device_view(), 1e-5f);
  Rwkv7TokenShift s;
  s.x = h.device_view(), s.mixes = mixes.device_view(), s.out = out.device_view();
  s.shift = pool.device_view().ptr<float>() + C, s.shift_stride = stride;
  s.seq_of = meta_d.as<int32_t>(), s.cu_seqlens = s.seq_of + T, s.slots = s.cu_seqlens + 4;
  rwkv7_shift_mix_cuda(s);
  synchronize(current_stream());
  h.download(), out.download(), pool.download();

  std::vector<float> xh(size_t(T * C)), normed(xh.size()), wh(static_cast<size_t>(C)),
      bh(static_cast<size_t>(C)), mh(static_cast<size_t>(6 * C));
  std::vector<float> pool_h(static_cast<size_t>(5 * stride)), delta(xh.size());
  for (size_t i = 0; i < xh.size(); ++i) xh[i] = x.at(int64_t(i));
  for (int64_t i = 0; i < C; ++i) wh[size_t(i)] = w.at(i), bh[size_t(i)] = b.at(i);
  for (size_t i = 0; i < mh.size(); ++i) mh[i] = mixes.at(int64_t(i));
  layer_norm(xh.data(), T, 1, C, wh.data(), bh.data(), 1e-5f, normed.data());
  for (size_t i = 0; i < xh.size(); ++i) ASSERT_NEAR(h.at(int64_t(i)), normed[i], 2e-5f * std::fabs(normed[i]) + 2e-5f);
  // The CPU's shift over the GPU's normed rows, from the pool's initial values.
  std::vector<float> gpu_normed(xh.size());
  for (size_t i = 0; i < xh.size(); ++i) gpu_normed[i] = h.at(int64_t(i));
  DeviceOperand initial(DType::f32, {5 * stride}, 6);  // same seed: the pool as it was
  for (size_t i = 0; i < pool_h.size(); ++i) pool_h[i] = initial.at(int64_t(i));
  rwkv7_token_shift(gpu_normed.data(), batch, C,
                    [&](int64_t q) { return pool_h.data() + batch.state_slots[size_t(q)] * stride + C; },
                    delta.data());
  for (int m = 0; m < 6; ++m)
    for (int64_t e = 0; e < T * C; ++e) {
      const float want = gpu_normed[size_t(e)] + delta[size_t(e)] * mh[size_t(m * C + e % C)];
      ASSERT_NEAR(out.at(m * T * C + e), want, std::fabs(want) / 128 + 1e-5f) << "mix " << m << " at " << e;
    }
  for (size_t i = 0; i < pool_h.size(); ++i) ASSERT_EQ(pool.at(int64_t(i)), pool_h[i]) << "pool float " << i;

  // The norm fused into the shift (the runner's launch) on a fresh copy of the pool: the two launches' lerps and
  // shift rows (the emulator holds it to their bits; here within a rounding, should the compiler contract them
  // differently).
  DeviceOperand fused_pool(DType::f32, {5 * stride}, 6), fused_out(DType::bf16, {6, T, C}, 7);
  Rwkv7TokenShift f = s;
  f.x = x.device_view(), f.out = fused_out.device_view();
  f.norm_weight = w.device_view(), f.norm_bias = b.device_view(), f.eps = 1e-5f;
  f.shift = fused_pool.device_view().ptr<float>() + C;
  rwkv7_shift_mix_cuda(f);
  synchronize(current_stream());
  fused_out.download(), fused_pool.download();
  for (int64_t e = 0; e < 6 * T * C; ++e)
    ASSERT_NEAR(fused_out.at(e), out.at(e), std::fabs(out.at(e)) / 128 + 1e-5f) << "fused lerp at " << e;
  for (size_t i = 0; i < pool_h.size(); ++i)
    ASSERT_NEAR(fused_pool.at(int64_t(i)), pool.at(int64_t(i)), 2e-5f * std::fabs(pool_h[i]) + 2e-5f) << i;
}

#endif

}  // namespace
}  // namespace attnzoo
