// transpose_cuda's refusals (transpose_cuda.h), plain C++ so they hold before any CUDA call and on any machine.
#include <string>

#include "core/error.h"
#include "layers/cuda/rows.h"
#include "layers/cuda/transpose_cuda.h"

namespace attnzoo {
namespace {

void require_f32_matrix(const TensorView& t, const char* name, const Device* device) {
  require_cuda_tensor(t, name, device);
  if (t.dtype != DType::f32) throw DTypeError(std::string(name) + ": expected float32, got " + dtype_name(t.dtype));
  require(t.ndim == 2, name, [&] { return "expected 2 dims [rows, cols], got " + t.shape_str(); });
  require(t.strides[1] == 1 || t.shape[1] <= 1, name, "last dimension must be contiguous (stride 1)");
  require(t.strides[0] >= t.shape[1] || t.shape[0] <= 1, name,
          [&] {
            return "rows overlap: row stride " + std::to_string(t.strides[0]) + " < " + std::to_string(t.shape[1]);
          });
}

}  // namespace

void check_transpose_cuda(const Transpose& t) {
  require_f32_matrix(t.src, "src", nullptr);
  require_f32_matrix(t.dst, "dst", &t.src.device);
  require(t.dst.shape[0] == t.src.shape[1] && t.dst.shape[1] == t.src.shape[0], "dst", [&] {
    return "expected [" + std::to_string(t.src.shape[1]) + ", " + std::to_string(t.src.shape[0]) + "] (src " +
           t.src.shape_str() + " transposed), got " + t.dst.shape_str();
  });
}

}  // namespace attnzoo
