#pragma once
// MLA absorbed decode on an NVIDIA GPU: one new token per sequence against a paged (or contiguous) latent cache,
// the latent read once per 16 heads, split over the context when the sequences alone would leave the GPU idle
// (mla_decode_kernel.cuh has the four kernels). Same semantics as mla_decode_reference for what it accepts.
#include "core/device.h"
#include "kernels/softmax/cuda/mla_decode_launch_plan.h"
#include "kernels/softmax/mla_problem.h"

namespace attnzoo {

// What only the CUDA path requires beyond make_mla_cache_problem's checks: padded q with one new token per
// sequence (no cu_seqlens: `packed`), kv_lora_rank <= 512, qk_nope_head_dim <= 512, qk_rope_head_dim <= 128,
// sequences and block rows that fit int32. (int8 / fp8 latent caches are refused while the problem is built.)
// ArgumentError naming the argument.
void check_cuda_mla_decode(const MlaProblem& p, bool packed);

// Runs a problem check_cuda_mla_decode accepted, whose q / out / w_kv_b / latent pointers are device memory of the
// current device, on `stream`. cache_seqlens and block_table are host memory, read here; what the kernels need
// is uploaded stream-ordered, so the caller may free them on return.
void mla_decode_cuda(const MlaProblem& p, Stream stream);

// The same in two halves, for callers that run one problem's plan many times: a model step's MLA layers, which
// differ only in their tensors' addresses (cuda_mla::MlaTensors), plan once per step and launch once per layer
// with no host planning, upload or allocation.
struct PreparedMlaDecodeCuda {
  cuda_mla::MlaLaunchPlan plan;  // the caller copies plan.metadata to device memory the launches read, and gives
                                 // them scratch_bytes() of scratch
  const void* attend = nullptr;  // the attention kernel's instantiation for the problem
  size_t attend_smem = 0;
  size_t scratch_bytes() const { return plan.device_bytes - plan.metadata.size(); }
};
// For a problem check_cuda_mla_decode accepted, on the current device. CUDA builds only (mla_decode.cu).
PreparedMlaDecodeCuda prepare_mla_decode_cuda(const MlaProblem& p);
// Launches on `stream` reading the plan's `metadata` (on the device) and using `scratch` (launches that share one
// run one after another on one stream), over the tensors `t` of the dtypes and strides the prepared problem had.
void launch_prepared_mla_decode_cuda(const PreparedMlaDecodeCuda& d, const unsigned char* metadata,
                                     unsigned char* scratch, const cuda_mla::MlaTensors& t, Stream stream);

}  // namespace attnzoo
