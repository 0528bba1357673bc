// copy_head_rows_cuda's refusals (head_rows_cuda.h), plain C++ so they hold before any CUDA call and on any machine.
#include "core/error.h"
#include "layers/cuda/head_rows_cuda.h"
#include "layers/cuda/rows.h"

namespace attnzoo {

void check_head_rows_cuda(const HeadRowCopy& c) {
  require_cuda_tensor(c.src, "src");
  require_cuda_tensor(c.dst, "dst", &c.src.device);
  check_head_row_copy(c, &c.src.device);
}

}  // namespace attnzoo
