#pragma once
// RWKV-7 test problems shared by the CUDA kernels' emulated cases (testing/cuda_emulation/rwkv7_cases.cc,
// rwkv7_chunk_cases.cc) and their GPU tests (cuda/rwkv7_recurrent_cuda_test.cc, rwkv7_chunk_cuda_test.cc): inputs
// shaped as RWKV-7 blocks make them (a = -kk with kk unit norm per head, b = kk * iclr with iclr in (0, 1), keys
// scaled by K^-1/2; that shape is also the CPU kernels' test's, rwkv7_test.cc), log decays of a chosen strength;
// the host runs each compares with, and the problem its refusal tests hand to a device path's check.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/linear/rwkv7/problem.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "testing/test_util.h"

namespace attnzoo::testing {

struct Rwkv7Case {
  int64_t B = 1, T = 1, H = 2, K = 64, V = 64;
  float w_min = -3.f, w_max = -0.01f;  // log decays spread over [w_min, w_max] (a squashed N(0, 1) draw)
  bool initial_state = true;
  std::vector<int32_t> cu_seqlens;  // packed sequences (B must be 1)
  DType dtype = DType::f32;         // r, w, k, v, a, b
  DType out_dtype = DType::f32;     // o
  int64_t nseq() const { return cu_seqlens.empty() ? B : int64_t(cu_seqlens.size()) - 1; }
  std::string label() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) + " K=" +
           std::to_string(K) + " V=" + std::to_string(V) + " w=[" + std::to_string(w_min) + "," +
           std::to_string(w_max) + "] " + dtype_name(dtype) + "->" + dtype_name(out_dtype) +
           (initial_state ? " h0" : "") + (cu_seqlens.empty() ? "" : " packed");
  }
};

// Field by field: designated initializers that skip fields warn under -Wextra.
inline Rwkv7Case rwkv7_case(int64_t B, int64_t T, int64_t H, int64_t K, int64_t V, bool initial_state = true) {
  Rwkv7Case c;
  c.B = B, c.T = T, c.H = H, c.K = K, c.V = V, c.initial_state = initial_state;
  return c;
}

// RWKV-7's transition shape over `rows` rows of K channels, in place from a's and b's N(0, 1) draws: a = -kk with
// kk a's row at unit norm, b = kk * iclr with iclr = sigmoid(b) in (0, 1), so that the low-rank part removes at
// most what it finds along kk and the state stays bounded; the keys k scaled by K^-1/2.
inline void shape_rwkv7_transition(HostTensor& a, HostTensor& b, HostTensor& k, int64_t rows, int64_t K) {
  for (int64_t i = 0; i < rows; ++i) {
    double norm = 0;
    for (int64_t j = 0; j < K; ++j) norm += double(a.at(i * K + j)) * a.at(i * K + j);
    norm = std::sqrt(norm) + 1e-6;
    for (int64_t j = 0; j < K; ++j) {
      const int64_t e = i * K + j;
      const float kk = float(a.at(e) / norm), iclr = 1.f / (1.f + std::exp(-b.at(e)));
      store_from_f32(a.view.data, a.view.dtype, e, -kk);
      store_from_f32(b.view.data, b.view.dtype, e, kk * iclr);
      store_from_f32(k.view.data, k.view.dtype, e, k.at(e) / std::sqrt(float(K)));
    }
  }
}

struct Rwkv7Inputs {
  HostTensor r, w, k, v, a, b, h0;
  Rwkv7Inputs(const Rwkv7Case& c, uint64_t seed)
      : r(c.dtype, {c.B, c.T, c.H, c.K}, seed), w(c.dtype, {c.B, c.T, c.H, c.K}, seed + 1),
        k(c.dtype, {c.B, c.T, c.H, c.K}, seed + 2), v(c.dtype, {c.B, c.T, c.H, c.V}, seed + 3),
        a(c.dtype, {c.B, c.T, c.H, c.K}, seed + 4), b(c.dtype, {c.B, c.T, c.H, c.K}, seed + 5),
        h0(DType::f32, {c.nseq(), c.H, c.K, c.V}, seed + 6) {
    shape_rwkv7_transition(a, b, k, c.B * c.T * c.H, c.K);
    for (int64_t e = 0; e < w.numel(); ++e) {
      const float spread = 0.5f * (1.f + std::tanh(w.at(e)));
      store_from_f32(w.view.data, c.dtype, e, c.w_min + (c.w_max - c.w_min) * spread);
    }
  }
  // Host views of the inputs; o and the states are the caller's.
  Rwkv7Args args(const Rwkv7Case& c) const {
    Rwkv7Args x;
    x.r = r.view, x.w = w.view, x.k = k.view, x.v = v.view, x.a = a.view, x.b = b.view;
    x.scale = 1.f / std::sqrt(float(c.K));
    if (c.initial_state) x.initial_state = h0.view;
    if (!c.cu_seqlens.empty()) x.cu_seqlens = c.cu_seqlens.data(), x.cu_seqlens_len = int64_t(c.cu_seqlens.size());
    return x;
  }
};

// The CUDA kernel's bound, emulated or on a GPU: f32 arithmetic (and the device's expf) alone separates kernel
// and reference; a 16-bit output adds its rounding. States are f32 either way, held to 1e-4.
inline double rwkv7_cuda_tolerance(const Rwkv7Case& c) { return c.out_dtype == DType::f32 ? 1e-4 : 1e-2; }

// The CUDA chunk's bound (outputs and states, against the reference and the CPU chunk): its products take bf16
// operands, a relative RMS error of a few 1e-3, where a wrong mask, decay or missing term costs tens of percent.
inline double rwkv7_chunk_cuda_tolerance() { return 1e-2; }

// A run's output o [B, T, H, V] and final states s [N, H, K, V].
struct Rwkv7Outputs {
  HostTensor o, s;
};

// `entry` (the reference, or a CPU path: recurrent_rwkv7, chunk_rwkv7 at a chunk size) on the host inputs of
// case `c`, f32 outputs.
template <class Entry>
Rwkv7Outputs rwkv7_host_outputs(const Rwkv7Case& c, const Rwkv7Inputs& in, Entry&& entry) {
  Rwkv7Outputs out{HostTensor(DType::f32, {c.B, c.T, c.H, c.V}, 0, 0.f),
                   HostTensor(DType::f32, {c.nseq(), c.H, c.K, c.V}, 0, 0.f)};
  Rwkv7Args a = in.args(c);
  a.o = out.o.view, a.final_state = out.s.view;
  entry(a);
  return out;
}

inline Rwkv7Outputs rwkv7_reference_outputs(const Rwkv7Case& c, const Rwkv7Inputs& in) {
  return rwkv7_host_outputs(c, in, rwkv7_reference);
}

// Case `c`'s problem on host views, `edit` applied, handed to `check` (a device path's check_cuda_*): the refusal
// tests, whose checks read shapes and pointers, never data.
template <class Edit, class Check>
void check_rwkv7_problem(const Rwkv7Case& c, Edit&& edit, Check&& check) {
  const Rwkv7Inputs in(c, 1);
  HostTensor o(c.out_dtype, {c.B, c.T, c.H, c.V}, 0, 0.f);
  Rwkv7Args a = in.args(c);
  a.o = o.view;
  Rwkv7Problem p = make_rwkv7_problem(a);
  edit(p);
  check(p);
}

}  // namespace attnzoo::testing
