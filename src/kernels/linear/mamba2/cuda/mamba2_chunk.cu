// Mamba-2's chunked SSD launch: the gated linear recurrence's kernels (gla_chunk.cu) on the plan
// mamba2_chunk_launch.cc makes.
#include "kernels/linear/common/cuda/gla_chunk_cuda.h"
#include "kernels/linear/mamba2/cuda/mamba2_chunk_cuda.h"
#include "kernels/linear/mamba2/cuda/mamba2_chunk_launch.h"

namespace attnzoo {

void chunk_mamba2_cuda(const Mamba2Problem& p, Stream stream) {
  run_gla_chunk_plan(cuda_mamba2::plan_mamba2_chunk(p), stream, "x");
}

}  // namespace attnzoo
