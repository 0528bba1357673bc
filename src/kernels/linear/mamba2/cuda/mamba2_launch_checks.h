#pragma once
// What both CUDA Mamba-2 launches (the recurrence, mamba2_recurrent_launch.cc, and the chunked SSD,
// mamba2_chunk_launch.cc) refuse alike before their own limits: a tensor they read or write off its element's
// alignment (common/cuda/launch_checks.h), named as the problem names it.
#include "kernels/linear/mamba2/problem.h"

namespace attnzoo::cuda_mamba2 {

void require_mamba2_aligned(const Mamba2Problem& p);

}  // namespace attnzoo::cuda_mamba2
