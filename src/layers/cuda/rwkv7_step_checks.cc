// rwkv7_step_cuda.h's refusals, plain C++ so they hold before any CUDA call and on any machine.
#include <cmath>
#include <string>
#include <utility>

#include "core/error.h"
#include "layers/cuda/rows.h"
#include "layers/cuda/rwkv7_step_cuda.h"

namespace attnzoo {
namespace {

std::string dims(int64_t a, int64_t b = -1) {
  return "[" + std::to_string(a) + (b >= 0 ? ", " + std::to_string(b) : "") + "]";
}

// A contiguous tensor of `dtype` on `device` (or any CUDA device) holding `numel` values.
void require_values(const TensorView& t, const char* name, DType dtype, int64_t numel, const Device* device) {
  require_cuda_tensor(t, name, device);
  if (t.dtype != dtype)
    throw DTypeError(std::string(name) + ": expected " + dtype_name(dtype) + ", got " + dtype_name(t.dtype));
  require(t.is_contiguous() && t.numel() == numel, name, [&] {
    return "expected " + std::to_string(numel) + " contiguous values, got shape " + t.shape_str();
  });
}

// A contiguous 2-D [rows, cols] of `dtype`.
void require_matrix(const TensorView& t, const char* name, DType dtype, int64_t rows, int64_t cols,
                    const Device* device) {
  require_values(t, name, dtype, rows * cols, device);
  require(t.ndim == 2 && t.shape[0] == rows && t.shape[1] == cols, name,
          [&] { return "expected " + dims(rows, cols) + ", got " + t.shape_str(); });
}

// T rows of `width` f32 from a [T, width] tensor whose width splits into `heads`.
int64_t head_width(const TensorView& t, const char* name, int64_t heads) {
  require(t.ndim == 2, name, [&] { return "expected [T, heads * dim], got " + t.shape_str(); });
  require(heads > 0 && t.shape[1] > 0 && t.shape[1] % heads == 0, name, [&] {
    return "width " + std::to_string(t.shape[1]) + " does not split into " + std::to_string(heads) + " heads";
  });
  return t.shape[1] / heads;
}

}  // namespace

void check_rwkv7_layer_norm_cuda(const TensorView& x, const TensorView& weight, const TensorView& bias,
                                 const TensorView& y, float eps) {
  require(x.ndim == 2 && x.shape[1] > 0, "x", [&] { return "expected [rows, dim], dim > 0, got " + x.shape_str(); });
  const int64_t rows = x.shape[0], dim = x.shape[1];
  require_matrix(x, "x", DType::f32, rows, dim, nullptr);
  require_matrix(y, "y", DType::f32, rows, dim, &x.device);
  require_values(weight, "weight", DType::f32, dim, &x.device);
  if (bias.data) require_values(bias, "bias", DType::f32, dim, &x.device);
  require(std::isfinite(eps) && eps >= 0.f, "eps", "must be finite and >= 0");
}

void check_rwkv7_shift_mix_cuda(const Rwkv7TokenShift& s) {
  require(s.x.ndim == 2, "x", [&] { return "expected [T, C], got " + s.x.shape_str(); });
  const int64_t T = s.x.shape[0], C = s.x.shape[1];
  require_matrix(s.x, "x", DType::f32, T, C, nullptr);
  require(s.mixes.ndim == 2 && s.mixes.shape[0] >= 1 && s.mixes.shape[1] == C, "mixes",
          [&] { return "expected [M, " + std::to_string(C) + "], M >= 1, got " + s.mixes.shape_str(); });
  const int64_t M = s.mixes.shape[0];
  require_matrix(s.mixes, "mixes", DType::f32, M, C, &s.x.device);
  require_values(s.out, "out", DType::bf16, M * T * C, &s.x.device);
  require(s.out.ndim == 3 && s.out.shape[0] == M && s.out.shape[1] == T, "out",
          [&] { return "expected [" + std::to_string(M) + ", " + std::to_string(T) + ", " + std::to_string(C) +
                       "], got " + s.out.shape_str(); });
  if (s.norm_weight.data) {
    require_values(s.norm_weight, "norm_weight", DType::f32, C, &s.x.device);
    if (s.norm_bias.data) require_values(s.norm_bias, "norm_bias", DType::f32, C, &s.x.device);
    require(std::isfinite(s.eps) && s.eps >= 0.f, "eps", "must be finite and >= 0");
  } else {
    require(!s.norm_bias.data, "norm_bias", "given without norm_weight");
  }
  if (T == 0) return;
  require(s.shift != nullptr, "shift", "null");
  require(s.shift_stride >= C, "shift_stride", [&] {
    return std::to_string(s.shift_stride) + " is shorter than a row of " + std::to_string(C);
  });
  require(s.seq_of != nullptr, "seq_of", "null");
  require(s.cu_seqlens != nullptr, "cu_seqlens", "null");
}

void check_rwkv7_activate_cuda(const TensorView& x, const TensorView& y) {
  require_values(x, "x", DType::f32, x.numel(), nullptr);
  if (y.dtype != DType::f32 && y.dtype != DType::bf16)
    throw DTypeError(std::string("y: expected float32 or bfloat16, got ") + dtype_name(y.dtype));
  require_values(y, "y", y.dtype, x.numel(), &x.device);
}

void check_rwkv7_prepare_keys_cuda(const Rwkv7Keys& p) {
  const int64_t K = head_width(p.k, "k", p.heads), V = head_width(p.v, "v", p.heads);
  const int64_t T = p.k.shape[0], HK = p.heads * K, HV = p.heads * V;
  for (auto [t, name] : {std::pair{&p.k, "k"}, {&p.a, "a"}, {&p.a_rec, "a_rec"}})
    require_matrix(*t, name, DType::f32, T, HK, &p.k.device);
  require_values(p.k_k, "k_k", DType::f32, HK, &p.k.device);
  require_values(p.k_a, "k_a", DType::f32, HK, &p.k.device);
  require_matrix(p.v, "v", DType::f32, T, HV, &p.k.device);
  require_matrix(p.v_first, "v_first", DType::f32, T, HV, &p.k.device);
  if (p.v_gate.data) require_matrix(p.v_gate, "v_gate", DType::f32, T, HV, &p.k.device);
  if (p.w.data) require_matrix(p.w, "w", DType::f32, T, HK, &p.k.device);
}

void check_rwkv7_output_cuda(const Rwkv7Output& p) {
  const int64_t K = head_width(p.r, "r", p.heads), V = head_width(p.o, "o", p.heads);
  const int64_t T = p.o.shape[0], HK = p.heads * K, HV = p.heads * V;
  for (auto [t, name] : {std::pair{&p.o, "o"}, {&p.v, "v"}, {&p.g, "g"}})
    require_matrix(*t, name, DType::f32, T, HV, &p.o.device);
  require_matrix(p.r, "r", DType::f32, T, HK, &p.o.device);
  require_matrix(p.k, "k", DType::f32, T, HK, &p.o.device);
  require_values(p.r_k, "r_k", DType::f32, HK, &p.o.device);
  require_values(p.norm_weight, "norm_weight", DType::f32, HV, &p.o.device);
  require_values(p.norm_bias, "norm_bias", DType::f32, HV, &p.o.device);
  require_matrix(p.out, "out", DType::bf16, T, HV, &p.o.device);
  require(std::isfinite(p.eps) && p.eps >= 0.f, "eps", "must be finite and >= 0");
}

}  // namespace attnzoo
