#pragma once
// Softmax-attention prefill on an NVIDIA GPU (sm_80 and later): the FlashAttention-2 schedule on mma.sync
// tensor cores, bf16 / f16 operands, f32 accumulation, output in out's dtype. Same semantics as
// attention_prefill_reference: bottom-right-aligned causal, sliding window, softcap, ALiBi, sinks, varlen.
#include "core/device.h"
#include "kernels/softmax/problem.h"

namespace attnzoo {

// What only the CUDA path requires beyond make_prefill_problem's checks: bf16 / f16 q, k, v of one dtype;
// head_dim 64, 96, 128 or 256 with Dv == D (96 runs the sm_80 kernel, on Hopper too); no block mask; contiguous
// unquantized K/V; 16-byte aligned bases and strides that are multiples of 8 elements. ArgumentError /
// DTypeError naming the argument.
void check_cuda_prefill(const AttentionProblem& p);

// Runs a validated problem whose q/k/v/o pointers are device memory on the current device (attention_prefill
// sets p.device current first), on `stream`. Host metadata
// (p.seqs, opts.sinks, opts.alibi_slopes: host pointers of Hq floats) is uploaded by this function,
// stream-ordered, so the caller may free it as soon as this returns.
void attention_prefill_cuda(const AttentionProblem& p, Stream stream);

}  // namespace attnzoo
