#pragma once
// The Hopper (sm_90a) prefill's launcher, for prefill.cu's dispatch (choose_prefill_path): FlashAttention-3's
// design on wgmma and TMA (prefill_sm90_tile.cuh). CUDA builds only.
#include "core/device.h"
#include "kernels/softmax/cuda/prefill_sm90_params.h"
#include "kernels/softmax/problem.h"

namespace attnzoo {

// A problem check_cuda_prefill accepted and sm90_prefill_gap covers, on an sm_90 device (the current one).
void attention_prefill_cuda_sm90(const AttentionProblem& p, Stream stream);

// The Hopper kernel over bound parameters (their metadata and maps already on the device and encoded):
// `work_items` CTAs per query head, q / k / v of `dtype` (bf16 or f16), head dim D.
void launch_prefill_sm90_cuda(const cuda_prefill::PrefillSm90Params& params, unsigned work_items, int64_t Hq,
                              int64_t D, DType dtype, Stream stream);

}  // namespace attnzoo
