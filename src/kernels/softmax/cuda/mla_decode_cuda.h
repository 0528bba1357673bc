#pragma once
// MLA absorbed decode on an NVIDIA GPU: one new token per sequence against a paged (or contiguous) latent cache,
// the latent read once per 16 heads, split over the context when the sequences alone would leave the GPU idle
// (mla_decode_kernel.cuh has the four kernels). Same semantics as mla_decode_reference for what it accepts.
#include "core/device.h"
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

}  // namespace attnzoo
