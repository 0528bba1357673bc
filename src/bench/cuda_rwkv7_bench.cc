#include "bench/cuda_rwkv7_bench.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/device_fill.h"
#include "core/convert.h"
#include "core/error.h"
#include "layers/batch.h"
#include "layers/cuda/rwkv7_step_cuda.h"
#include "layers/layer_norm.h"
#include "layers/rwkv7_state.h"
#include "layers/rwkv7_time_mix.h"

namespace attnzoo::bench {
namespace {

constexpr float kDecayScale = -0.6065306597126334f;  // -exp(-1/2), fla's

float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

// Noise in [-1, 1) as f32: bf16 noise widened, so every row differs and nothing overflows.
DeviceBuffer f32_noise(Device device, int64_t n, uint64_t seed, Stream stream) {
  const std::vector<uint16_t> bits = noise_bf16(size_t(n), seed);
  std::vector<float> v(bits.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = load_as_f32(bits.data(), DType::bf16, int64_t(i));
  DeviceBuffer b(device, v.size() * 4);
  b.upload(v.data(), v.size() * 4, stream);
  return b;
}

template <typename T>
DeviceBuffer upload(Device device, const std::vector<T>& v, Stream stream) {
  DeviceBuffer b(device, v.size() * sizeof(T));
  b.upload(v.data(), v.size() * sizeof(T), stream);
  return b;
}

// The prefill's S equal sequences, their shift rows at pool slots 2s + 1 of a pool twice their number (a pool
// after some churn), each slot's row `stride` floats: the time mix's and the channel mix's rows side by side.
// rwkv7_norm_shift_mix: the block's LayerNorm fused in first, as the runner launches it.
Timing shift_mix(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  const int64_t T = c["T"], C = c["C"], M = c["M"], S = c["S"], stride = 2 * C;
  const bool norm = c.kernel == "rwkv7_norm_shift_mix";
  const float eps = 1e-5f;
  const DeviceBuffer x = f32_noise(device, T * C, 71, stream), mixes = f32_noise(device, M * C, 72, stream);
  const DeviceBuffer pool = f32_noise(device, 2 * S * stride, 73, stream), out(device, size_t(M * T * C) * 2);
  const DeviceBuffer weight = f32_noise(device, C, 74, stream), bias = f32_noise(device, C, 75, stream);
  Batch batch;
  std::vector<int32_t> seq_of;
  for (int64_t s = 0; s < S; ++s) {
    batch.cu_seqlens.push_back(int32_t((s + 1) * T / S));
    batch.state_slots.push_back(int32_t(2 * s + 1));
    seq_of.insert(seq_of.end(), size_t(batch.cu_seqlens.back() - batch.cu_seqlens[size_t(s)]), int32_t(s));
  }
  batch.tokens.assign(size_t(T), 0);
  if (!device.is_cuda()) {
    std::vector<float> h(size_t(norm ? T * C : 0));
    return timer([&] {
      if (norm) layer_norm(x.as<float>(), T, 1, C, weight.as<float>(), bias.as<float>(), eps, h.data());
      rwkv7_shift_mix_host(norm ? h.data() : x.as<float>(), batch, C, mixes.as<float>(), M,
                           [&](int64_t s) { return pool.as<float>() + batch.state_slots[size_t(s)] * stride; },
                           out.as<uint16_t>());
    });
  }
  const DeviceBuffer seq_of_d = upload(device, seq_of, stream), cu_d = upload(device, batch.cu_seqlens, stream),
                     slots_d = upload(device, batch.state_slots, stream);
  Rwkv7TokenShift p;
  p.x = view_on(x, DType::f32, {T, C}), p.mixes = view_on(mixes, DType::f32, {M, C});
  p.out = view_on(out, DType::bf16, {M, T, C});
  p.shift = pool.as<float>(), p.shift_stride = stride, p.slots = slots_d.as<const int32_t>();
  p.seq_of = seq_of_d.as<const int32_t>(), p.cu_seqlens = cu_d.as<const int32_t>();
  if (norm) p.norm_weight = view_on(weight, DType::f32, {C}), p.norm_bias = view_on(bias, DType::f32, {C}), p.eps = eps;
  check_rwkv7_shift_mix_cuda(p);
#if ATTNZOO_WITH_CUDA
  return timer([&] { rwkv7_shift_mix_cuda(p, stream); });
#else
  throw DeviceError("rwkv7_shift_mix: this build has no CUDA");
#endif
}

// The decay (f32 in place, as the runner applies it to w) or the channel mix's relu^2 (f32 in, bf16 out).
Timing activate(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  const bool decay = c.kernel == "rwkv7_decay";
  const int64_t n = c["T"] * c["width"];
  const DeviceBuffer x = f32_noise(device, n, 74, stream), y16(device, decay ? 0 : size_t(n) * 2);
  const TensorView xv = view_on(x, DType::f32, {n});
  const TensorView yv = decay ? xv : view_on(y16, DType::bf16, {n});
  const Rwkv7Activation act = decay ? Rwkv7Activation::decay : Rwkv7Activation::relu2;
  if (!device.is_cuda()) return timer([&] { rwkv7_activate_host(act, x.as<float>(), n, yv.data, yv.dtype); });
  check_rwkv7_activate_cuda(xv, yv);
#if ATTNZOO_WITH_CUDA
  return timer([&] { rwkv7_activate_cuda(act, xv, yv, stream); });
#else
  throw DeviceError(c.kernel + ": this build has no CUDA");
#endif
}

// A later layer's (v_gate given: v mixed towards the first layer's v).
Timing prepare_keys(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  const int64_t T = c["T"], H = c["H"], K = c["K"], V = c["V"], HK = H * K, HV = H * V;
  const DeviceBuffer k = f32_noise(device, T * HK, 75, stream), a = f32_noise(device, T * HK, 76, stream),
                     a_rec(device, size_t(T * HK) * 4), k_k = f32_noise(device, HK, 77, stream),
                     k_a = f32_noise(device, HK, 78, stream), v = f32_noise(device, T * HV, 79, stream),
                     v_first = f32_noise(device, T * HV, 80, stream), v_gate = f32_noise(device, T * HV, 81, stream);
  if (!device.is_cuda()) {
    return timer([&] {
      rwkv7_prepare_keys_host(k.as<float>(), a.as<float>(), a_rec.as<float>(), k_k.as<float>(), k_a.as<float>(),
                              v.as<float>(), v_first.as<float>(), v_gate.as<float>(), T, H, K, V, true);
    });
  }
  Rwkv7Keys p;
  p.k = view_on(k, DType::f32, {T, HK}), p.a = view_on(a, DType::f32, {T, HK});
  p.a_rec = view_on(a_rec, DType::f32, {T, HK}), p.k_k = view_on(k_k, DType::f32, {HK});
  p.k_a = view_on(k_a, DType::f32, {HK}), p.v = view_on(v, DType::f32, {T, HV});
  p.v_first = view_on(v_first, DType::f32, {T, HV}), p.v_gate = view_on(v_gate, DType::f32, {T, HV});
  p.heads = H;
  check_rwkv7_prepare_keys_cuda(p);
#if ATTNZOO_WITH_CUDA
  return timer([&] { rwkv7_prepare_keys_cuda(p, stream); });
#else
  throw DeviceError("rwkv7_prepare_keys: this build has no CUDA");
#endif
}

Timing output(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  const int64_t T = c["T"], H = c["H"], K = c["K"], V = c["V"], HK = H * K, HV = H * V;
  const float eps = float(V) * 1e-5f;  // fla's head_dim x norm_eps
  const DeviceBuffer o = f32_noise(device, T * HV, 82, stream), nw = f32_noise(device, HV, 83, stream),
                     nb = f32_noise(device, HV, 84, stream), r = f32_noise(device, T * HK, 85, stream),
                     k = f32_noise(device, T * HK, 86, stream), r_k = f32_noise(device, HK, 87, stream),
                     v = f32_noise(device, T * HV, 88, stream), g = f32_noise(device, T * HV, 89, stream),
                     out(device, size_t(T * HV) * 2);
  if (!device.is_cuda()) {
    return timer([&] {
      rwkv7_output_host(o.as<float>(), nw.as<float>(), nb.as<float>(), r.as<float>(), k.as<float>(), r_k.as<float>(),
                        v.as<float>(), g.as<float>(), T, H, K, V, eps, out.as<uint16_t>());
    });
  }
  Rwkv7Output p;
  p.o = view_on(o, DType::f32, {T, HV}), p.norm_weight = view_on(nw, DType::f32, {HV});
  p.norm_bias = view_on(nb, DType::f32, {HV}), p.r = view_on(r, DType::f32, {T, HK});
  p.k = view_on(k, DType::f32, {T, HK}), p.r_k = view_on(r_k, DType::f32, {HK});
  p.v = view_on(v, DType::f32, {T, HV}), p.g = view_on(g, DType::f32, {T, HV});
  p.out = view_on(out, DType::bf16, {T, HV}), p.heads = H, p.eps = eps;
  check_rwkv7_output_cuda(p);
#if ATTNZOO_WITH_CUDA
  return timer([&] { rwkv7_output_cuda(p, stream); });
#else
  throw DeviceError("rwkv7_output: this build has no CUDA");
#endif
}

LinearRow rwkv7_step_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    if (c.kernel == "rwkv7_shift_mix" || c.kernel == "rwkv7_norm_shift_mix") return shift_mix(c, device, stream, timer);
    if (c.kernel == "rwkv7_prepare_keys") return prepare_keys(c, device, stream, timer);
    if (c.kernel == "rwkv7_output") return output(c, device, stream, timer);
    return activate(c, device, stream, timer);
  });
}

}  // namespace

void rwkv7_shift_mix_host(const float* x, const Batch& batch, int64_t C, const float* mixes, int64_t M,
                          const std::function<float*(int64_t)>& shift_of, uint16_t* out) {
  // The time mix's forward: the deltas, then each lerp as its projection takes it.
  const int64_t T = batch.num_tokens();
  std::vector<float> delta(size_t(T * C));
  rwkv7_token_shift(x, batch, C, shift_of, delta.data());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t i = 0; i < T * C; ++i)
      store_from_f32(out, DType::bf16, m * T * C + i, x[i] + delta[size_t(i)] * mixes[m * C + i % C]);
}

void rwkv7_activate_host(Rwkv7Activation act, const float* x, int64_t n, void* y, DType y_dtype) {
  // rwkv7_time_mix.cc's (the LoRAs' middles, the decay) and rwkv7_channel_mix.cc's (relu^2) formulas.
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    float out = v;
    if (act == Rwkv7Activation::tanh) out = std::tanh(v);
    if (act == Rwkv7Activation::sigmoid) out = sigmoid(v);
    if (act == Rwkv7Activation::decay) out = kDecayScale * sigmoid(v);
    if (act == Rwkv7Activation::relu2) out = v > 0.f ? v * v : 0.f;
    store_from_f32(y, y_dtype, i, out);
  }
}

void rwkv7_prepare_keys_host(float* k, float* a, float* a_rec, const float* k_k, const float* k_a, float* v,
                             float* v_first, const float* v_gate, int64_t T, int64_t H, int64_t K, int64_t V,
                             bool fused_l2norm) {
  // The time mix's forward from a = sigmoid(a) to the recurrence's inputs.
  for (int64_t i = 0; i < T * H * K; ++i) a[i] = sigmoid(a[i]);
  for (int64_t i = 0; i < T * H * V; ++i) {
    if (v_gate) v[i] += sigmoid(v_gate[i]) * (v_first[i] - v[i]);
    else v_first[i] = v[i];
  }
  rwkv7_prepare_keys(k, a, a_rec, k_k, k_a, T, H, K, fused_l2norm);
}

void rwkv7_output_host(const float* o, const float* norm_weight, const float* norm_bias, const float* r,
                       const float* k, const float* r_k, const float* v, const float* g, int64_t T, int64_t H,
                       int64_t K, int64_t V, float eps, uint16_t* out) {
  // The time mix's tail, before o_proj takes it in bf16.
  std::vector<float> normed(size_t(T * H * V));
  layer_norm(o, T, H, V, norm_weight, norm_bias, eps, normed.data());
  rwkv7_bonus_gate(normed.data(), r, k, r_k, v, g, T, H, K, V);
  for (int64_t i = 0; i < T * H * V; ++i) store_from_f32(out, DType::bf16, i, normed[size_t(i)]);
}

std::vector<LinearCase> rwkv7_step_cases(Scale s) {
  const bool tiny = s == Scale::tiny;
  const int64_t T = tiny ? 13 : 4096, C = tiny ? 128 : 2560, H = tiny ? 2 : 40, S = tiny ? 3 : 8;
  return {{"rwkv7_shift_mix", {{"T", T}, {"C", C}, {"M", 6}, {"S", S}}},  // the time mix's six lerps
          {"rwkv7_shift_mix", {{"T", T}, {"C", C}, {"M", 1}, {"S", S}}},  // the channel mix's one
          {"rwkv7_decay", {{"T", T}, {"width", C}}},
          {"rwkv7_relu2", {{"T", T}, {"width", 4 * C}}},
          {"rwkv7_prepare_keys", {{"T", T}, {"H", H}, {"K", 64}, {"V", 64}}},
          {"rwkv7_output", {{"T", T}, {"H", H}, {"K", 64}, {"V", 64}}},
          {"rwkv7_norm_shift_mix", {{"T", T}, {"C", C}, {"M", 6}, {"S", S}}}};  // the shift with attn_norm fused in
}

double rwkv7_step_bytes(const LinearCase& c) {
  const double T = double(c["T"]);
  if (c.kernel == "rwkv7_shift_mix" || c.kernel == "rwkv7_norm_shift_mix") {
    const double C = double(c["C"]), M = double(c["M"]), norm = c.kernel == "rwkv7_norm_shift_mix" ? 2 * C * 4 : 0;
    return T * C * 4 + M * C * 4 + M * T * C * 2 + 2.0 * double(c["S"]) * C * 4 + norm;
  }
  if (c.kernel == "rwkv7_decay") return T * double(c["width"]) * 8;
  if (c.kernel == "rwkv7_relu2") return T * double(c["width"]) * 6;
  const double HK = double(c["H"] * c["K"]), HV = double(c["H"] * c["V"]);
  // prepare_keys: k, a read and written, a_rec written; v read and written, v_first and v_gate read; k_k, k_a.
  if (c.kernel == "rwkv7_prepare_keys") return T * HK * 4 * 5 + T * HV * 4 * 4 + HK * 4 * 2;
  // output: o, v, g, r, k read, bf16 out written; the norm's weight and bias and r_k.
  return T * HV * 4 * 3 + T * HK * 4 * 2 + T * HV * 2 + HV * 4 * 2 + HK * 4;
}

BandwidthTable rwkv7_step_table() {
  return {"rwkv7_step", "RWKV-7 step kernels (2.9B widths, 4096 tokens)", rwkv7_step_cases, rwkv7_step_row,
          rwkv7_step_bytes};
}

}  // namespace attnzoo::bench
