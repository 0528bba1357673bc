#pragma once
// The double-precision reference of the projections' GEMM (layers/cuda/gemm_cuda.h), for its emulated and GPU
// tests: y = x W^T + bias (+ the old y), each product of x rounded to W's dtype (what the tensor cores multiply:
// the kernel stages x in W's dtype) times W, summed in double. With each element its bound: one ulp of y's dtype
// of the value, plus f32 accumulation's worst case over K terms of the magnitudes summed.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace attnzoo::testing {

struct GemmExpected {
  std::vector<double> value, bound;  // [M * N], row-major
};

inline double dtype_ulp(DType t) { return t == DType::bf16 ? 1.0 / 128 : t == DType::f16 ? 1.0 / 1024 : 0.0; }

// Host views; `y_old` (accumulate) is y before the call, may be null.
inline GemmExpected gemm_expected(const TensorView& x, const TensorView& w, const TensorView* bias,
                                  const TensorView* y_old, DType y_dtype) {
  const int64_t M = x.shape[0], K = x.shape[1], N = w.shape[0];
  std::vector<double> xr(size_t(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      float r = 0;  // room for any dtype; only w.dtype's bytes are used
      store_from_f32(&r, w.dtype, 0, load_as_f32(x.data, x.dtype, m * x.strides[0] + k));
      xr[size_t(m * K + k)] = load_as_f32(&r, w.dtype, 0);
    }
  GemmExpected e;
  e.value.resize(size_t(M * N));
  e.bound.resize(size_t(M * N));
  const double f32_sum = double(K + 4) * std::ldexp(1.0, -23);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = xr[size_t(m * K + k)] * double(load_as_f32(w.data, w.dtype, n * w.strides[0] + k));
        sum += p;
        magnitude += std::fabs(p);
      }
      if (bias) {
        const double b = load_as_f32(bias->data, bias->dtype, n * bias->strides[0]);
        sum += b;
        magnitude += std::fabs(b);
      }
      if (y_old) {
        const double o = load_as_f32(y_old->data, y_old->dtype, m * y_old->strides[0] + n);
        sum += o;
        magnitude += std::fabs(o);
      }
      e.value[size_t(m * N + n)] = sum;
      e.bound[size_t(m * N + n)] = std::fabs(sum) * dtype_ulp(y_dtype) + magnitude * f32_sum + 1e-30;
    }
  return e;
}

// How many elements of y (a host view) lie outside their bounds; the first few are printed by the caller.
inline int64_t gemm_mismatches(const TensorView& y, const GemmExpected& e, int64_t* first = nullptr) {
  const int64_t M = y.shape[0], N = y.shape[1];
  int64_t bad = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const double got = load_as_f32(y.data, y.dtype, m * y.strides[0] + n);
      const size_t i = size_t(m * N + n);
      if (!(std::fabs(got - e.value[i]) <= e.bound[i])) {
        if (bad == 0 && first) *first = int64_t(i);
        ++bad;
      }
    }
  return bad;
}

}  // namespace attnzoo::testing
