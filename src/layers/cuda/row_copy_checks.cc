// copy_rows_cuda's refusals (row_copy_cuda.h), plain C++ so they hold before any CUDA call and on any machine.
#include <string>

#include "core/error.h"
#include "layers/cuda/row_copy_cuda.h"
#include "layers/cuda/rows.h"

namespace attnzoo {

void check_copy_rows_cuda(const RowCopy& c) {
  require_f32_matrix(c.src, "src", nullptr);
  require_f32_matrix(c.dst, "dst", &c.src.device);
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
