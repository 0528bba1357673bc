#include "core/finite_check.h"

#include <algorithm>
#include <string>

#include "core/convert.h"
#include "core/error.h"

namespace attnzoo {
namespace {

constexpr int64_t kBlock = 1024;

// Scans the innermost dimension of one row; `flat` is the row's first flat index, for the message.
void scan_row(const char* row, const TensorView& t, int64_t flat, const char* name) {
  const int64_t n = t.shape[size_t(t.ndim - 1)], stride = t.strides[size_t(t.ndim - 1)];
  const size_t esize = dtype_size(t.dtype);
  float buf[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    if (stride == 1) {
      convert_to_f32(row + b * int64_t(esize), t.dtype, buf, size_t(m));
    } else {
      for (int64_t i = 0; i < m; ++i) convert_to_f32(row + (b + i) * stride * int64_t(esize), t.dtype, buf + i, 1);
    }
    bool ok = true;
    for (int64_t i = 0; i < m; ++i) ok &= buf[i] - buf[i] == 0.f;
    if (ok) continue;
    for (int64_t i = 0; i < m; ++i)
      require(buf[i] - buf[i] == 0.f, name, "contains NaN or Inf (flat index " + std::to_string(flat + b + i) + ")");
  }
}

void scan_dims(const char* base, const TensorView& t, int d, int64_t flat, int64_t inner, const char* name) {
  if (d == t.ndim - 1) return scan_row(base, t, flat, name);
  const int64_t step = t.strides[size_t(d)] * int64_t(dtype_size(t.dtype));
  const int64_t sub = inner / std::max<int64_t>(1, t.shape[size_t(d)]);
  for (int64_t i = 0; i < t.shape[size_t(d)]; ++i) scan_dims(base + i * step, t, d + 1, flat + i * sub, sub, name);
}

}  // namespace

void require_finite(const TensorView& t, const char* name) {
  if (t.empty() || !(t.dtype == DType::f32 || t.dtype == DType::bf16 || t.dtype == DType::f16)) return;
  if (t.ndim == 0) {
    float x;
    convert_to_f32(t.data, t.dtype, &x, 1);
    require(x - x == 0.f, name, "contains NaN or Inf");
    return;
  }
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[size_t(d)] == 0) return;
  scan_dims(static_cast<const char*>(t.data), t, 0, 0, t.numel(), name);
}

}  // namespace attnzoo
