// copy_rows_cuda's refusals (row_copy_cuda.h), plain C++ so they hold before any CUDA call and on any machine.
#include <string>

#include "core/error.h"
#include "layers/cuda/row_copy_cuda.h"
#include "layers/cuda/rows.h"

namespace attnzoo {
namespace {

void require_f32_rows(const TensorView& t, const char* name, const Device* device) {
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

void check_copy_rows_cuda(const RowCopy& c) {
  require_f32_rows(c.src, "src", nullptr);
  require_f32_rows(c.dst, "dst", &c.src.device);
  require(c.dst.shape[1] == c.src.shape[1], "dst", [&] {
    return "has " + std::to_string(c.dst.shape[1]) + " columns, src " + std::to_string(c.src.shape[1]);
  });
  require(c.rows >= 0, "rows", "must not be negative");
  require(c.src_rows || c.rows <= c.src.shape[0], "src",
          [&] { return "has " + std::to_string(c.src.shape[0]) + " rows, " + std::to_string(c.rows) + " copied"; });
  require(c.dst_rows || c.rows <= c.dst.shape[0], "dst",
          [&] { return "has " + std::to_string(c.dst.shape[0]) + " rows, " + std::to_string(c.rows) + " copied"; });
}

}  // namespace attnzoo
