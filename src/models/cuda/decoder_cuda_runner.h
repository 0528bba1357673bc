#pragma once
// The Llama family's decoder (Llama, Qwen2's q/k/v biases, Qwen3's q/k norms, Mistral's windows, SmolLM's NoPE
// layers ...), its MoE forms and the dense families' block forms (Gemma 2 / 3, OLMo 2, Cohere, Granite) computing
// on an NVIDIA GPU: DecoderModel's blocks run as the layers/cuda/ kernels, the projections
// on gemm_cuda, attention on the softmax family's CUDA prefill and paged decode, the K/V written into the pool's
// device memory. A step is one copy of its metadata up (tokens, positions, slot mappings, the attention's decode
// plans) and every layer's launches on the current stream with no wait (a fresh prefill's attention still uploads
// its own plan per layer); the requested logits rows stay in device memory for the caller (the engine samples
// them there). A step of cached sequences only is replayed from a CUDA graph once its launches recur
// (step_graphs.h).
//
// Numerics: the residual stream and logits are f32; the norms write bf16 rows, which the projections multiply
// with bf16 / f16 weights (f32 checkpoints rounded to bf16 at load, with a notice) or GGUF blocks, accumulating in
// f32; the MLP's intermediate is bf16 (the MoE experts' f32); q / k / v and the attention output are 16-bit (the
// cache's dtype, bf16 for an 8-bit cache).
#include <memory>

#include "core/device.h"
#include "models/decoder.h"
#include "models/device_runner.h"

namespace attnzoo {

// check_decoder_runs_on_cuda's refusals, then (CUDA builds) the weights uploaded to `device` for a pool whose
// paged K/V is `kv_dtype`; a build without CUDA refuses after the checks.
std::unique_ptr<DeviceRunner> make_decoder_cuda_runner(const DecoderParts& parts, Device device, DType kv_dtype);

}  // namespace attnzoo
