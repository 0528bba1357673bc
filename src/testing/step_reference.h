#pragma once
// Shared by the step kernels' GPU tests (layers/cuda/*_cuda_test.cc) and their emulated twins
// (testing/cuda_emulation/*_cases.cc), g++ only, no CUDA headers: the walk over a strided operand and its
// untouched-bytes check, the RoPE cases and their rope, and the host reference of the (centered) RMS norm.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "layers/norm.h"
#include "layers/rope.h"

namespace attnzoo::testing {

// fn(element offset) for every element of `view`, row-major.
template <class Fn>
void for_each_offset(const TensorView& view, Fn&& fn) {
  if (view.numel() == 0) return;
  std::vector<int64_t> idx(size_t(view.ndim), 0);
  for (;;) {
    int64_t off = 0;
    for (int d = 0; d < view.ndim; ++d) off += idx[size_t(d)] * view.strides[size_t(d)];
    fn(off);
    int d = view.ndim - 1;
    for (; d >= 0 && ++idx[size_t(d)] == view.shape[size_t(d)]; --d) idx[size_t(d)] = 0;
    if (d < 0) return;
  }
}

// The bytes of `host` outside `view` (over them) still 0xFF: nothing wrote between or after the rows.
inline bool outside_untouched(const std::vector<uint8_t>& host, const TensorView& view) {
  std::vector<bool> inside(host.size(), false);
  const size_t es = dtype_size(view.dtype);
  for_each_offset(view, [&](int64_t off) {
    for (size_t b = 0; b < es; ++b) inside[size_t(off) * es + b] = true;
  });
  for (size_t i = 0; i < host.size(); ++i)
    if (!inside[i] && host[i] != 0xFF) return false;
  return true;
}

// Tolerance for one output element rounded to `dtype` from an f32 result that may differ from the reference's by a
// few f32 ulp: one ulp of the output's dtype (a rounding that fell the other way) plus `f32_abs`.
inline double output_tolerance(DType dtype, double ref, double f32_rel, double f32_abs) {
  const double ulp = dtype == DType::bf16 ? 1.0 / 128 : dtype == DType::f16 ? 1.0 / 1024 : 0.0;
  return std::fabs(ref) * (ulp + f32_rel) + f32_abs;
}

inline Rope make_rope(int64_t head_dim, int64_t rotary_dim, RopeLayout layout, const std::string& type = "default") {
  RopeConfig c;
  c.head_dim = head_dim;
  c.rotary_dim = rotary_dim;
  c.layout = layout;
  c.type = type;
  c.theta = 500000.0;
  if (type != "default") {
    c.factor = 8.0;
    c.original_max_position_embeddings = 8192;
  }
  return Rope(c);
}

struct RopeCase {
  DType dtype;
  int64_t head_dim, rotary_dim;
  RopeLayout layout;
  std::string type = "default";
  int64_t tokens = 7;
  bool int64_positions = false;
  int64_t token_pad = 0;  // elements after each token's fused q | k | v row

  std::string label() const {
    return std::string(dtype_name(dtype)) + " D " + std::to_string(head_dim) + " rotary " +
           std::to_string(rotary_dim) + (layout == RopeLayout::interleaved ? " interleaved " : " half ") + type +
           " tokens " + std::to_string(tokens) + (int64_positions ? " i64" : " i32") + " pad " +
           std::to_string(token_pad);
  }
};

// Rows of `dim` from `src` normalised into `want`: RMS norm, or (centered) LayerNorm without bias, eps 1e-5,
// weighted by `w`.
inline void norm_rows_reference(const float* src, const float* w, int64_t rows, int64_t dim, bool centered,
                                float* want) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = src + r * dim;
    float* out = want + r * dim;
    if (!centered) {
      rms_norm_reference(row, 1, dim, dim, w, 1e-5f, out, dim);
      continue;
    }
    double mean = 0, ss = 0;
    for (int64_t k = 0; k < dim; ++k) mean += row[k];
    mean /= double(dim);
    for (int64_t k = 0; k < dim; ++k) ss += (row[k] - mean) * (row[k] - mean);
    const double inv = 1.0 / std::sqrt(ss / double(dim) + 1e-5);
    for (int64_t k = 0; k < dim; ++k) out[k] = float(double(w[k]) * (row[k] - mean) * inv);
  }
}

// The host twin of RoPE over a fused [tokens, row] buffer whose first Hq * D columns are q and next Hk * D are k:
// every element widened to f32 by `at`, then q and k rotated by Rope::apply.
template <class At>
std::vector<float> rope_fused_reference(const Rope& rope, At&& at, int64_t tokens, int64_t Hq, int64_t Hk, int64_t D,
                                        int64_t row, const int32_t* positions) {
  std::vector<float> want(size_t(tokens * row));
  for (int64_t i = 0; i < tokens * row; ++i) want[size_t(i)] = at(i);
  rope.apply(want.data(), tokens, Hq, row, positions);
  rope.apply(want.data() + Hq * D, tokens, Hk, row, positions);
  return want;
}

// The q and k views [tokens, H, D] of that fused buffer (`base` viewing it, element type `dtype`).
struct FusedQk {
  TensorView q, k;
};
inline FusedQk fused_qk_views(const TensorView& base, int64_t tokens, int64_t Hq, int64_t Hk, int64_t D, int64_t row,
                              DType dtype) {
  FusedQk v{base, base};
  v.q.ndim = v.k.ndim = 3;
  v.q.shape = {tokens, Hq, D};
  v.k.shape = {tokens, Hk, D};
  v.q.strides = v.k.strides = {row, D, 1};
  v.k.data = static_cast<char*>(base.data) + size_t(Hq * D) * dtype_size(dtype);
  return v;
}

}  // namespace attnzoo::testing
