#include "kernels/softmax/kv_quant.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/convert.h"
#include "core/error.h"

namespace attnzoo {

float kv_quant_max(DType t) { return t == DType::i8 ? 127.f : 448.f; }

float quantize_kv_row(const float* x, size_t n, DType t, void* dst) {
  float amax = 0.f;
  for (size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));  // fmax would drop a NaN
  bool finite = true;
  for (size_t i = 0; i < n; ++i) finite = finite && std::isfinite(x[i]);
  const float scale = amax / kv_quant_max(t);
  if (!finite || !(scale >= FLT_MIN)) {
    // Zero rows and rows too small to scale without subnormals (the kernels flush those) store zeros.
    std::memset(dst, 0, n);
    return finite ? 0.f : std::numeric_limits<float>::quiet_NaN();
  }
  if (t == DType::i8) {
    auto* q = static_cast<int8_t*>(dst);
    for (size_t i = 0; i < n; ++i) q[i] = int8_t(std::clamp(std::nearbyint(x[i] / scale), -127.f, 127.f));
  } else {
    auto* q = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < n; ++i) q[i] = f32_to_f8e4m3(x[i] / scale);
  }
  return scale;
}

void dequantize_kv_row(const void* src, DType t, float scale, float* dst, size_t n) {
  convert_to_f32(src, t, dst, n);
  for (size_t i = 0; i < n; ++i) dst[i] *= scale;
}

void check_kv_cache_dtype(const TensorView& t, const char* name) {
  require_host(t, name);
  check_kv_cache_operand(t, name);
}

void check_kv_cache_operand(const TensorView& t, const char* name) {
  require(t.data != nullptr || t.numel() == 0, name, "is null");
  if (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16 && !is_quantized_kv(t.dtype))
    throw DTypeError(std::string(name) + ": expected float32, bfloat16, float16, int8 or float8_e4m3fn, got " +
                     dtype_name(t.dtype));
}

KvScaleView check_kv_scale(const TensorView& cache, const TensorView& scale, const char* cache_name,
                           const char* scale_name) {
  if (!is_quantized_kv(cache.dtype)) {
    require(scale.data == nullptr, scale_name, [&] {
      return std::string("is only used with an int8 / float8_e4m3fn cache, ") + cache_name + " is " +
             dtype_name(cache.dtype);
    });
    return {};
  }
  require(scale.data != nullptr || cache.numel() == 0, scale_name, [&] {
    return std::string("is required: ") + cache_name + " is " + dtype_name(cache.dtype) +
           " (one f32 scale per cached row and head)";
  });
  if (scale.dtype != DType::f32)
    throw DTypeError(std::string(scale_name) + ": expected float32, got " + dtype_name(scale.dtype));
  bool same = scale.ndim == cache.ndim - 1;
  for (int d = 0; same && d < scale.ndim; ++d) same = scale.shape[d] == cache.shape[d];
  require(same, scale_name, [&] {
    return "must be shaped like " + std::string(cache_name) + " without its last dim (" + cache.shape_str() +
           "), got " + scale.shape_str();
  });
  for (int d = 0; d < scale.ndim; ++d) require(scale.strides[d] >= 0, scale_name, "negative strides are not supported");
  KvScaleView v;
  v.data = static_cast<const float*>(scale.data);
  v.block = scale.ndim >= 1 ? scale.strides[0] : 0;
  v.token = scale.ndim >= 2 ? scale.strides[1] : 0;
  v.head = scale.ndim >= 3 ? scale.strides[2] : 0;
  return v;
}

}  // namespace attnzoo
