#pragma once
// The Mamba-2 cases the CUDA scans' tests share (mamba2_chunk_cuda_test.cc, mamba2_recurrent_cuda_test.cc, the
// emulated testing/cuda_emulation/mamba2_chunk_cases.cc and ssm_cases.cc): a problem's shape and options, host
// inputs drawn for it (A spread over the heads, dt around a chosen mean), the host runs each compares with, and the
// problem the refusal tests hand to a device path's check.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/linear/mamba2/mamba2.h"
#include "kernels/linear/mamba2/problem.h"
#include "testing/test_util.h"

namespace attnzoo::testing {

struct Mamba2DeviceCase {
  int64_t B = 1, T = 1, H = 2, P = 64, G = 1, N = 128, chunk = 64;  // chunk: the chunked scan's chunk_size
  std::vector<int32_t> cu = {};       // packed sequences (B must be 1); the initializer keeps -Wextra quiet
                                      // on designated initializers that leave it out
  float A_min = -1.f, A_max = -0.5f;  // A spread evenly over the heads
  float dt_mean = 0.f;                // dt drawn as N(dt_mean, 1) before bias and softplus
  bool with_D = true, D_per_channel = false, with_z = true, with_bias = true, softplus = true, limit = false;
  bool with_h0 = true;
  DType dtype = DType::f32, out_dtype = DType::f32;
  int64_t nseq() const { return cu.empty() ? B : int64_t(cu.size()) - 1; }
  std::string label() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) + " P=" +
           std::to_string(P) + " G=" + std::to_string(G) + " N=" + std::to_string(N) + " chunk=" +
           std::to_string(chunk) + " A=[" + std::to_string(A_min) + "," + std::to_string(A_max) +
           "] dt_mean=" + std::to_string(dt_mean) + " " + dtype_name(dtype) + "->" + dtype_name(out_dtype) +
           (cu.empty() ? "" : " packed");
  }
};

// The shape fields in order, for the cases that set them all.
inline Mamba2DeviceCase mamba2_case(int64_t B, int64_t T, int64_t H, int64_t P, int64_t G, int64_t N,
                                    int64_t chunk = 64) {
  Mamba2DeviceCase c;
  c.B = B, c.T = T, c.H = H, c.P = P, c.G = G, c.N = N, c.chunk = chunk;
  return c;
}

struct Mamba2DeviceInputs {
  HostTensor x, dt, A, B, C, D, z, bias, h0;
  // Seeds `seed` (x) to `seed` + 7 (h0).
  explicit Mamba2DeviceInputs(const Mamba2DeviceCase& c, uint64_t seed = 11)
      : x(c.dtype, {c.B, c.T, c.H, c.P}, seed), dt(c.dtype, {c.B, c.T, c.H}, seed + 1), A(DType::f32, {c.H}, 0, 0.f),
        B(c.dtype, {c.B, c.T, c.G, c.N}, seed + 2, 0.5f), C(c.dtype, {c.B, c.T, c.G, c.N}, seed + 3, 0.5f),
        D(c.dtype, c.D_per_channel ? std::vector<int64_t>{c.H, c.P} : std::vector<int64_t>{c.H}, seed + 4),
        z(c.dtype, {c.B, c.T, c.H, c.P}, seed + 5), bias(DType::f32, {c.H}, seed + 6, 0.5f),
        h0(DType::f32, {c.nseq(), c.H, c.P, c.N}, seed + 7) {
    for (int64_t i = 0; i < dt.numel(); ++i) store_from_f32(dt.view.data, dt.view.dtype, i, dt.at(i) + c.dt_mean);
    for (int64_t h = 0; h < c.H; ++h)
      A.view.ptr<float>()[h] = c.A_min + (c.A_max - c.A_min) * float(h) / float(std::max<int64_t>(c.H - 1, 1));
  }
  // Host views of the inputs; y and the states are the caller's.
  Mamba2Args args(const Mamba2DeviceCase& c) const {
    Mamba2Args a;
    a.x = x.view, a.dt = dt.view, a.A = A.view, a.B = B.view, a.C = C.view;
    if (c.with_D) a.D = D.view;
    if (c.with_z) a.z = z.view;
    if (c.with_bias) a.dt_bias = bias.view;
    a.dt_softplus = c.softplus;
    if (c.limit) a.dt_limit = true, a.dt_min = 0.01f, a.dt_max = 2.f;
    if (c.with_h0) a.initial_state = h0.view;
    if (!c.cu.empty()) a.cu_seqlens = c.cu.data(), a.cu_seqlens_len = int64_t(c.cu.size());
    a.chunk_size = c.chunk;
    return a;
  }
};

// A run's output y [B, T, H, P] and final states s [N, H, P, N].
struct Mamba2Outputs {
  HostTensor y, s;
};

// `entry` (mamba2_reference, or a CPU path: mamba2_recurrent, mamba2_chunk_scan) on the host inputs of case `c`,
// f32 outputs.
template <class Entry>
Mamba2Outputs mamba2_host_outputs(const Mamba2DeviceCase& c, const Mamba2DeviceInputs& in, Entry&& entry) {
  Mamba2Outputs out{HostTensor(DType::f32, {c.B, c.T, c.H, c.P}, 0, 0.f),
                    HostTensor(DType::f32, {c.nseq(), c.H, c.P, c.N}, 0, 0.f)};
  Mamba2Args a = in.args(c);
  a.y = out.y.view, a.final_state = out.s.view;
  entry(a);
  return out;
}

// Case `c`'s problem on host views, `edit` applied, handed to `check` (a device path's check_cuda_*): the refusal
// tests, whose checks read shapes and pointers, never data.
template <class Edit, class Check>
void check_mamba2_problem(const Mamba2DeviceCase& c, Edit&& edit, Check&& check) {
  const Mamba2DeviceInputs in(c);
  HostTensor y(c.out_dtype, {c.B, c.T, c.H, c.P}, 0, 0.f);
  Mamba2Args a = in.args(c);
  a.y = y.view;
  Mamba2Problem p = make_mamba2_problem(a);
  edit(p);
  check(p);
}

}  // namespace attnzoo::testing
