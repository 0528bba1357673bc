// transpose_cuda's refusals (transpose_cuda.h), plain C++ so they hold before any CUDA call and on any machine.
#include <string>

#include "core/error.h"
#include "layers/cuda/rows.h"
#include "layers/cuda/transpose_cuda.h"

namespace attnzoo {

void check_transpose_cuda(const Transpose& t) {
  require_f32_matrix(t.src, "src", nullptr);
  require_f32_matrix(t.dst, "dst", &t.src.device);
  require(t.dst.shape[0] == t.src.shape[1] && t.dst.shape[1] == t.src.shape[0], "dst", [&] {
    return "expected [" + std::to_string(t.src.shape[1]) + ", " + std::to_string(t.src.shape[0]) + "] (src " +
           t.src.shape_str() + " transposed), got " + t.dst.shape_str();
  });
}

}  // namespace attnzoo
