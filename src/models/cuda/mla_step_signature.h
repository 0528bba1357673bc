#pragma once
// What a CUDA graph of a model step (step_graphs.h) bakes in from one MLA decode call's launch plan
// (mla_decode_launch_plan.h): the grids, the offsets into the step's metadata and scratch, and every scalar
// parameter. The plan's work list, merges and block table travel in the step's copy and may differ between two
// steps of one signature; anything the launches take by value may not. Plain C++, so make test checks that steps
// which only grew their contexts share a signature and steps whose launches differ do not.
#include <cstdint>
#include <vector>

#include "kernels/softmax/cuda/mla_decode_launch_plan.h"

namespace attnzoo {

void append_mla_launch_signature(const cuda_mla::MlaLaunchPlan& plan, std::vector<uint64_t>& signature);

}  // namespace attnzoo
