// The quantized decode projection's one branch to a GPU (gemv_tensors.h): the CUDA build and the CPU-only one
// differ in this file alone.
#include "kernels/quant/gemv_tensors.h"

#include <string>

#include "core/device_unreachable.h"
#include "core/error.h"

#if ATTNZOO_WITH_CUDA
#include "kernels/quant/cuda/gemv_cuda.h"
#endif

namespace attnzoo {
namespace {

void require_cpu_f32_rows(const TensorView& t, const char* name, int64_t rows, int64_t cols) {
  require(t.device.is_cpu(), name, [&] { return "lives on " + t.device.str() + ", the weight on the cpu"; });
  if (t.dtype != DType::f32) throw DTypeError(std::string(name) + ": takes float32 on the cpu, got " + dtype_name(t.dtype));
  require(t.ndim == 2 && t.shape[0] == rows && t.shape[1] == cols, name, [&] {
    return "must be [" + std::to_string(rows) + ", " + std::to_string(cols) + "], got " + t.shape_str();
  });
  require(t.strides[1] == 1 || cols <= 1, name, "rows must be contiguous (last stride 1)");
}

}  // namespace

void quant_gemv_tensors(const QuantMatrix& w, Device w_device, const TensorView& x, const TensorView& y) {
  if (w_device.is_cuda()) {
#if ATTNZOO_WITH_CUDA
    const QuantGemvProblem p = make_quant_gemv_cuda_problem(w, w_device, x, y);
    const DeviceGuard on(w_device);  // current_stream is the current device's
    quant_gemv_cuda(p, current_stream());
    return;
#else
    throw device_unreachable("w", w_device);
#endif
  }
  require(x.ndim == 2, "x", [&] { return "must be [M, K] (2-D), got " + x.shape_str(); });
  const int64_t M = x.shape[0];
  require_cpu_f32_rows(x, "x", M, w.cols);
  require_cpu_f32_rows(y, "y", M, w.rows);
  require(M <= 1 || x.strides[0] == w.cols, "x", "rows must be packed ([M, K] contiguous) on the cpu");
  require(M <= 1 || y.strides[0] >= w.rows, "y", "rows must not overlap");
  if (M == 0) return;
  quant_gemv_f32(w, nullptr, x.ptr<float>(), M, y.ptr<float>(), M <= 1 ? w.rows : y.strides[0]);
}

}  // namespace attnzoo
