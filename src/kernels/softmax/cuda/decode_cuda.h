#pragma once
// Decode attention on an NVIDIA GPU (sm_80 and later): paged split-KV, FlashDecoding's schedule. One CTA reads
// one chunk of one sequence's keys for one kv head and serves every query row that shares that head (Tq new
// tokens x the Hq / Hkv heads of its group), so each cached K / V byte crosses the memory bus once per step.
// Scores and P V run on mma.sync tensor cores (bf16 / f16 operands, f32 accumulation); chunks of a split
// sequence leave (max, sum, unnormalised output) in a workspace and a second kernel merges them by log-sum-exp.
// Same semantics as attention_decode_reference: bottom-right-aligned causal, window, softcap then ALiBi, sinks,
// rows that see no key give zeros; int8 / float8_e4m3fn caches with their per-(row, head) scales.
#include "core/device.h"
#include "kernels/softmax/cuda/decode_launch_plan.h"
#include "kernels/softmax/decode_problem.h"

namespace attnzoo {

// What only the CUDA path requires beyond make_decode_problem's checks: bf16 / f16 queries; out f32, bf16 or
// f16; a bf16 / f16 cache of q's dtype, or an int8 / float8_e4m3fn one; head_dim 64, 96, 128 or 256 with Dv == D;
// no block mask; 16-byte aligned bases and row strides (multiples of 16 bytes). ArgumentError / DTypeError
// naming the argument.
void check_cuda_decode(const DecodeProblem& p);

// Runs a validated decode problem whose q / o / k / v (and k_scale / v_scale data) pointers are device memory of
// the current device, on `stream`. Host metadata (p.seqlens, p.block_table, opts.sinks, opts.alibi_slopes) is
// read here and what the kernels need is uploaded stream-ordered, so the caller may free it on return.
void attention_decode_cuda(const DecodeProblem& p, Stream stream);

// The same in two halves, for callers that run one problem's plan many times: a model step's attention layers,
// which differ only in their tensors' addresses (cuda_decode::DecodeTensors), plan once per block group and
// launch once per layer with no host metadata, no upload and no allocation.
struct PreparedDecodeCuda {
  cuda_decode::DecodeLaunchPlan plan;  // the caller copies plan.metadata to device memory the launches read, and
                                       // gives them plan.device_bytes - plan.metadata.size() bytes of partials
  const void* kernel = nullptr;        // the chunk kernel's instantiation for the problem
  int smem_bytes = 0;
  size_t partial_bytes() const { return plan.device_bytes - plan.metadata.size(); }
};
// For a validated problem (check_cuda_decode) on the current device. CUDA builds only (decode.cu).
PreparedDecodeCuda prepare_attention_decode_cuda(const DecodeProblem& p);
// Launches on `stream` reading the plan's `metadata` (on the device) and using `partials` as its scratch (launches
// that share one run one after another on one stream), with the tensors `t`, of the strides and dtypes the
// prepared problem had.
void launch_prepared_decode_cuda(const PreparedDecodeCuda& d, const unsigned char* metadata, unsigned char* partials,
                                 const cuda_decode::DecodeTensors& t, Stream stream);

}  // namespace attnzoo
