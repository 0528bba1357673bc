#include "bench/kernel_cases_linear.h"

#include <cmath>
#include <random>
#include <vector>

#include "bench/case_io.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "kernels/linear/gla/gla.h"
#include "kernels/linear/kda/kda.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "kernels/linear/short_conv/short_conv.h"

namespace attnzoo::bench {
namespace {

enum class Entry { gdn_recurrent, kda_recurrent, gla_recurrent, gdn_chunk, gla_chunk };

const char* entry_name(Entry e) {
  switch (e) {
    case Entry::gdn_recurrent: return "recurrent_gated_delta_rule";
    case Entry::kda_recurrent: return "recurrent_kda";
    case Entry::gla_recurrent: return "recurrent_gla";
    case Entry::gdn_chunk: return "chunk_gated_delta_rule";
    case Entry::gla_chunk: return "chunk_gla";
  }
  return "";
}

struct LinearCaseSpec {
  const char* name;
  Entry entry;
  DType dtype;
  int64_t H, HV, K, V;
  std::vector<int32_t> lens;  // packed with cu_seqlens when `packed`, else a batch of lens.size() x lens[0]
  bool packed;
  float g_lo, g_hi;           // log decays drawn uniformly from [g_lo, g_hi]
};

bool channel_gate(Entry e) {
  return e == Entry::kda_recurrent || e == Entry::gla_recurrent || e == Entry::gla_chunk;
}
bool has_beta(Entry e) { return e != Entry::gla_recurrent && e != Entry::gla_chunk; }

// Decode batches (T = 1) as an engine steps them, and ragged packed sequences with a sequence of one token, at
// decays from mild (state kept for hundreds of tokens) to strong (e^-8 per step, where an unstable formulation
// loses the state's precision); head dims up to 128 in both K and V; grouped value heads (HV = 2 H, Qwen3-Next's).
std::vector<LinearCaseSpec> linear_case_specs() {
  return {
      {"gdn_decode_mild_gva", Entry::gdn_recurrent, DType::bf16, 4, 8, 128, 128, {1, 1, 1, 1, 1}, false, -0.1f, 0.f},
      {"gdn_varlen_strong", Entry::gdn_recurrent, DType::bf16, 2, 2, 64, 64, {1, 37, 5, 90}, true, -8.f, -1.f},
      {"kda_decode_strong", Entry::kda_recurrent, DType::bf16, 4, 4, 128, 128, {1, 1, 1}, false, -6.f, -1.f},
      {"kda_varlen_mild", Entry::kda_recurrent, DType::f16, 2, 2, 64, 128, {50, 1, 23}, true, -0.05f, 0.f},
      {"gla_decode_mild", Entry::gla_recurrent, DType::bf16, 4, 4, 128, 128, {1, 1, 1, 1}, false, -0.1f, 0.f},
      {"gla_varlen_strong", Entry::gla_recurrent, DType::f32, 2, 2, 64, 64, {1, 64, 17}, true, -6.f, -1.f},
      {"gdn_chunk_varlen", Entry::gdn_chunk, DType::bf16, 2, 2, 128, 128, {100, 1, 64, 200}, true, -0.5f, 0.f},
      {"gla_chunk_varlen", Entry::gla_chunk, DType::bf16, 2, 2, 128, 64, {130, 1, 64, 77}, true, -2.f, 0.f},
  };
}

HostArray uniform_array(DType t, std::vector<int64_t> shape, float lo, float hi, uint32_t seed) {
  HostArray a = make_array(t, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < a.numel(); ++i) store_from_f32(a.bytes.data(), t, i, u(rng));
  return a;
}

std::string run_linear(const LinearCaseSpec& c, const std::filesystem::path& dir, Device device, uint32_t seed,
                       bool& refused) {
  const int64_t N = int64_t(c.lens.size());
  const std::vector<int32_t> cu = offsets(c.lens);
  const int64_t B = c.packed ? 1 : N, T = c.packed ? cu.back() : c.lens[0];
  const HostArray q = random_array(c.dtype, {B, T, c.H, c.K}, seed);
  const HostArray k = random_array(c.dtype, {B, T, c.H, c.K}, seed + 1);
  const HostArray v = random_array(c.dtype, {B, T, c.HV, c.V}, seed + 2);
  const HostArray g = channel_gate(c.entry) ? uniform_array(DType::f32, {B, T, c.HV, c.K}, c.g_lo, c.g_hi, seed + 3)
                                            : uniform_array(DType::f32, {B, T, c.HV}, c.g_lo, c.g_hi, seed + 3);
  const HostArray beta = uniform_array(c.dtype, {B, T, c.HV}, 0.05f, 1.f, seed + 4);
  const HostArray h0 = random_array(DType::f32, {N, c.HV, c.K, c.V}, seed + 5);
  const HostArray o = make_array(DType::f32, {B, T, c.HV, c.V});
  const HostArray hT = make_array(DType::f32, {N, c.HV, c.K, c.V});
  const std::string stem = c.name;
  write_npy(dir / (stem + "_q.npy"), q);
  write_npy(dir / (stem + "_k.npy"), k);
  write_npy(dir / (stem + "_v.npy"), v);
  write_npy(dir / (stem + "_g.npy"), g);
  if (has_beta(c.entry)) write_npy(dir / (stem + "_beta.npy"), beta);
  write_npy(dir / (stem + "_initial_state.npy"), h0);
  const bool delta = has_beta(c.entry);
  std::string entry = "{\"name\": " + json_string(stem) + ", \"kind\": \"linear\", \"entry\": " +
                      json_string(entry_name(c.entry)) + ", \"dtype\": " + json_string(dtype_name(c.dtype)) +
                      ", \"out_dtype\": \"float32\", \"gate\": " +
                      (channel_gate(c.entry) ? "\"channel\"" : "\"head\"") +
                      ", \"delta\": " + (delta ? "true" : "false") + ", \"l2norm\": " + (delta ? "true" : "false") +
                      ", \"B\": " + std::to_string(B) + ", \"T\": " + std::to_string(T) + ", \"H\": " +
                      std::to_string(c.H) + ", \"HV\": " + std::to_string(c.HV) + ", \"K\": " + std::to_string(c.K) +
                      ", \"V\": " + std::to_string(c.V) + ", \"cu_seqlens\": " + (c.packed ? list(cu) : "null") +
                      ", \"scale\": " + number(1.f / std::sqrt(float(c.K)));
  return finish_case(entry, refused, [&] {
    const Placed dq = place(q, device), dk = place(k, device), dv = place(v, device), dg = place(g, device);
    const Placed dh0 = place(h0, device), dout = place(o, device), dhT = place(hT, device);
    if (delta) {
      const Placed dbeta = place(beta, device);
      DeltaArgs a;
      a.q = dq.view;
      a.k = dk.view;
      a.v = dv.view;
      a.g = dg.view;
      a.beta = dbeta.view;
      a.o = dout.view;
      a.initial_state = dh0.view;
      a.final_state = dhT.view;
      if (c.packed) {
        a.cu_seqlens = cu.data();
        a.cu_seqlens_len = int64_t(cu.size());
      }
      a.use_qk_l2norm_in_kernel = true;
      if (c.entry == Entry::gdn_recurrent) recurrent_gated_delta_rule(a);
      else if (c.entry == Entry::kda_recurrent) recurrent_kda(a);
      else chunk_gated_delta_rule(a);
    } else {
      GlaOptions opts;
      opts.initial_state = dh0.view;
      opts.final_state = dhT.view;
      if (c.packed) {
        opts.cu_seqlens = cu.data();
        opts.cu_seqlens_len = int64_t(cu.size());
      }
      if (c.entry == Entry::gla_chunk)
        chunk_gla(dq.view, dk.view, dv.view, dg.view, dout.view, opts);
      else
        recurrent_gla(dq.view, dk.view, dv.view, dg.view, dout.view, opts);
    }
    write_npy(dir / (stem + "_out.npy"), fetch(dout, o));
    write_npy(dir / (stem + "_final_state.npy"), fetch(dhT, hT));
  });
}

// RWKV-7 through recurrent_rwkv7 (or chunk_rwkv7 in 64-token chunks when `chunked`), inputs as its blocks make
// them: a = -kk (kk a unit vector per head), b = kk x iclr (iclr in (0, 1)), keys scaled by K^-1/2, log decays over
// [-3, -0.01]; ragged packed sequences, or a decode batch.
std::string run_rwkv7(const char* name, DType dtype, int64_t H, int64_t K, int64_t V, const std::vector<int32_t>& lens,
                      bool packed, bool chunked, const std::filesystem::path& dir, Device device, uint32_t seed,
                      bool& refused) {
  const int64_t N = int64_t(lens.size());
  const std::vector<int32_t> cu = offsets(lens);
  const int64_t B = packed ? 1 : N, T = packed ? cu.back() : lens[0];
  HostArray r = random_array(dtype, {B, T, H, K}, seed), k = random_array(dtype, {B, T, H, K}, seed + 1);
  const HostArray v = random_array(dtype, {B, T, H, V}, seed + 2);
  const HostArray w = uniform_array(dtype, {B, T, H, K}, -3.f, -0.01f, seed + 3);
  const HostArray kk = random_array(DType::f32, {B, T, H, K}, seed + 4);
  const HostArray iclr = uniform_array(DType::f32, {B, T, H, K}, 0.f, 1.f, seed + 5);
  HostArray a = make_array(dtype, {B, T, H, K}), b = make_array(dtype, {B, T, H, K});
  for (int64_t i = 0; i < B * T * H; ++i) {
    double norm = 0;
    for (int64_t j = 0; j < K; ++j) norm += std::pow(double(load_as_f32(kk.bytes.data(), DType::f32, i * K + j)), 2);
    for (int64_t j = 0; j < K; ++j) {
      const int64_t e = i * K + j;
      const float unit = float(load_as_f32(kk.bytes.data(), DType::f32, e) / std::sqrt(norm));
      store_from_f32(a.bytes.data(), dtype, e, -unit);
      store_from_f32(b.bytes.data(), dtype, e, unit * load_as_f32(iclr.bytes.data(), DType::f32, e));
      store_from_f32(k.bytes.data(), dtype, e, load_as_f32(k.bytes.data(), dtype, e) / std::sqrt(float(K)));
    }
  }
  const HostArray h0 = random_array(DType::f32, {N, H, K, V}, seed + 6);
  const HostArray o = make_array(DType::f32, {B, T, H, V}), hT = make_array(DType::f32, {N, H, K, V});
  const std::string stem = name;
  const std::pair<const char*, const HostArray*> inputs[] = {{"r", &r}, {"w", &w}, {"k", &k}, {"v", &v},
                                                             {"a", &a}, {"b", &b}, {"initial_state", &h0}};
  for (const auto& [what, x] : inputs) write_npy(dir / (stem + "_" + what + ".npy"), *x);
  const std::string entry = "{\"name\": " + json_string(stem) + ", \"kind\": \"linear\", \"entry\": " +
                            (chunked ? "\"chunk_rwkv7\", " : "\"recurrent_rwkv7\", ") +
                            "\"dtype\": " + json_string(dtype_name(dtype)) + ", \"out_dtype\": \"float32\", \"B\": " +
                            std::to_string(B) + ", \"T\": " + std::to_string(T) + ", \"H\": " + std::to_string(H) +
                            ", \"HV\": " + std::to_string(H) + ", \"K\": " + std::to_string(K) + ", \"V\": " +
                            std::to_string(V) + ", \"cu_seqlens\": " + (packed ? list(cu) : "null") + ", \"scale\": " +
                            number(1.f / std::sqrt(float(K)));
  return finish_case(entry, refused, [&] {
    const Placed dr = place(r, device), dw = place(w, device), dk = place(k, device), dv = place(v, device);
    const Placed da = place(a, device), db = place(b, device), dh0 = place(h0, device);
    const Placed dout = place(o, device), dhT = place(hT, device);
    Rwkv7Args x;
    x.r = dr.view, x.w = dw.view, x.k = dk.view, x.v = dv.view, x.a = da.view, x.b = db.view;
    x.scale = 1.f / std::sqrt(float(K));
    x.initial_state = dh0.view, x.final_state = dhT.view, x.o = dout.view;
    if (packed) x.cu_seqlens = cu.data(), x.cu_seqlens_len = int64_t(cu.size());
    if (chunked)
      chunk_rwkv7(x, 64);
    else
      recurrent_rwkv7(x);
    write_npy(dir / (stem + "_out.npy"), fetch(dout, o));
    write_npy(dir / (stem + "_final_state.npy"), fetch(dhT, hT));
  });
}

// causal_conv1d's prefill over ragged packed sequences (one shorter than the window), bias, SiLU, initial states
// [N, D, W - 1] and the final tails written for decode.
std::string run_conv(const char* name, DType dtype, int64_t D, int64_t W, const std::vector<int32_t>& lens,
                     const std::filesystem::path& dir, Device device, uint32_t seed, bool& refused) {
  const int64_t N = int64_t(lens.size()), S = W - 1;
  const std::vector<int32_t> cu = offsets(lens);
  const HostArray x = random_array(dtype, {1, cu.back(), D}, seed), weight = random_array(dtype, {D, W}, seed + 1);
  const HostArray bias = random_array(dtype, {D}, seed + 2), h0 = random_array(DType::f32, {N, D, S}, seed + 3);
  const HostArray y = make_array(DType::f32, {1, cu.back(), D}), hT = make_array(DType::f32, {N, D, S});
  const std::string stem = name;
  const std::pair<const char*, const HostArray*> inputs[] = {
      {"x", &x}, {"weight", &weight}, {"bias", &bias}, {"initial_state", &h0}};
  for (const auto& [what, a] : inputs) write_npy(dir / (stem + "_" + what + ".npy"), *a);
  const std::string entry = "{\"name\": " + json_string(stem) + ", \"kind\": \"linear\", \"entry\": \"causal_conv1d\", " +
                            "\"dtype\": " + json_string(dtype_name(dtype)) + ", \"out_dtype\": \"float32\", \"D\": " +
                            std::to_string(D) + ", \"W\": " + std::to_string(W) + ", \"activation\": \"silu\", " +
                            "\"cu_seqlens\": " + list(cu);
  return finish_case(entry, refused, [&] {
    const Placed dx = place(x, device), dwt = place(weight, device), db = place(bias, device);
    const Placed dh0 = place(h0, device), dy = place(y, device), dhT = place(hT, device);
    CausalConv1dOptions opts;
    opts.bias = db.view, opts.initial_state = dh0.view, opts.final_state = dhT.view;
    opts.activation = ConvActivation::silu;
    opts.cu_seqlens = cu.data(), opts.cu_seqlens_len = int64_t(cu.size());
    causal_conv1d(dx.view, dwt.view, dy.view, opts);
    write_npy(dir / (stem + "_out.npy"), fetch(dy, y));
    write_npy(dir / (stem + "_final_state.npy"), fetch(dhT, hT));
  });
}

}  // namespace

void write_linear_cases(const std::filesystem::path& dir, Device device, uint32_t& seed,
                        const std::function<void(const std::string& entry, bool refused)>& add) {
  for (const LinearCaseSpec& c : linear_case_specs()) {
    bool refused = false;
    const std::string e = run_linear(c, dir, device, seed += 10, refused);
    add(e, refused);
  }
  bool refused = false;
  std::string e =
      run_rwkv7("rwkv7_varlen", DType::bf16, 2, 64, 64, {1, 40, 7, 64}, true, false, dir, device, seed += 10, refused);
  add(e, refused);
  e = run_rwkv7("rwkv7_decode_kv", DType::f16, 4, 64, 128, {1, 1, 1}, false, false, dir, device, seed += 10, refused);
  add(e, refused);
  // The chunked form: a one-token sequence, chunk-unaligned ones and one over two chunks.
  e = run_rwkv7("rwkv7_chunk_varlen", DType::bf16, 2, 64, 64, {1, 100, 37, 130}, true, true, dir, device, seed += 10,
                refused);
  add(e, refused);
  e = run_conv("conv1d_varlen", DType::bf16, 96, 4, {1, 30, 2, 77}, dir, device, seed += 10, refused);
  add(e, refused);
}

}  // namespace attnzoo::bench
