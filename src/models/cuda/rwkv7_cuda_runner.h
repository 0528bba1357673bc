#pragma once
// RWKV-7 (Rwkv7Model: fla's RWKV7ForCausalLM, its GGUF form) computing on an NVIDIA GPU, the DeviceRunner contract
// of decoder_cuda_runner.h. Per step: one copy of its metadata up (tokens, each token's sequence, cu_seqlens, the
// state slots), then per layer on the current stream
//   pre_norm (layer 0): LayerNorm with bias on the stream (layers/cuda/rwkv7_step_cuda.h)
//   attn_norm, the token shift and its six lerps in one kernel, against and into each sequence's attn_shift in its
//   pool slot (the normed rows never stored)
//   r / k / v projections and the w / a / g (/ v) LoRAs on gemm_cuda, w's tanh and g's sigmoid in one launch
//   the key preparation (kk, the in-context learning rate, v's mix towards layer 0's v, w's decay), RWKV-7
//   (kernels/linear/rwkv7/cuda: the chunked form on tensor cores for a prefill with a sequence of 32 tokens or
//   more, the recurrence token by token otherwise) on the wkv states in place in the pool's slots; the chunk's
//   stream-ordered scratch is bounded by 256 MiB per call: a longer prefill runs in pieces cut on the sequences'
//   chunk boundaries (~4700 tokens each at 40 heads of 64; rwkv7_prefill_pieces.h), a cut sequence's state carried
//   in its slot, so the same bits as one call
//   the group norm + bonus + gate in one kernel, o_proj adding into the residual stream
//   ffn_norm with the channel mix's shift (ffn_shift) and lerp in one kernel, key, relu^2, value adding into the
//   stream
// 21 launches per layer after the first (20 in layer 0: no v LoRA, the pre_norm) for a decode step or a recurrent
// prefill, 23 (+3 per further piece) for a chunked prefill; 25, 27 and 29 before the fusions and the in-place
// prefill (docs/benchmarks/cuda.md).
// then the final norm and lm_head over the requested rows, whose logits stay in device memory.
//
// Numerics: the residual stream, the normed rows, the shift states, the recurrence's inputs and state and the
// logits are f32 (the chunked prefill's products take bf16 operands, accumulating in f32); the projections read bf16 rows (the lerps, the LoRAs' middles, the gated output, relu^2) with
// bf16 / f16 weights (f32 checkpoints rounded to bf16 at load) or GGUF blocks, accumulating in f32. A prefill's
// launches read the batch's host cu_seqlens (the recurrence and the chunk upload them per call), so only decode
// steps are captured in CUDA graphs.
#include <memory>

#include "core/device.h"
#include "models/device_runner.h"
#include "models/rwkv7_model.h"

namespace attnzoo {

// check_rwkv7_runs_on_cuda's refusals, then (CUDA builds) the weights uploaded to `device`; a build without CUDA
// refuses after the checks. kv_dtype does not apply (no KV cache).
std::unique_ptr<DeviceRunner> make_rwkv7_cuda_runner(const Rwkv7Model& model, Device device, DType kv_dtype);

}  // namespace attnzoo
