#pragma once
// The Hopper (sm_90a) prefill's launcher, for prefill.cu's dispatch (choose_prefill_path): FlashAttention-3's
// design on wgmma and TMA (prefill_sm90_tile.cuh). CUDA builds only.
#include "core/device.h"
#include "kernels/softmax/cuda/prefill_sm90_params.h"
#include "kernels/softmax/problem.h"

namespace attnzoo {

// The Hopper kernel over bound parameters (their metadata and maps already on the device and encoded): a
// persistent grid of `ctas` (plan_prefill_sm90's) sharing the items by `schedule`, q / k / v of `dtype` (bf16 or
// f16), head dim D.
void launch_prefill_sm90_cuda(const cuda_prefill::PrefillSm90Params& params, unsigned ctas, int64_t D, DType dtype,
                              cuda_prefill::PrefillSchedule schedule, Stream stream);

}  // namespace attnzoo
