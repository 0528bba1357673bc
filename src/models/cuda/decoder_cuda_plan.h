#pragma once
// The host half of the CUDA decoder runner (decoder_cuda_runner.h), plain C++ that builds and is tested on every
// machine: which decoders it takes (everything else refused by name before anything is uploaded), the layout of
// the one host-to-device copy of a step's metadata, and the attention calls a ragged batch becomes.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "layers/batch.h"
#include "models/decoder.h"

namespace attnzoo {

// The ArgumentError "device: <feature> (<architecture>...) runs on the CPU only so far" for the first part of the
// model the runner does not cover. It takes blocks of softmax attention (optional q/k/v/o biases, q/k norms per
// head or across heads, RoPE or NoPE, sliding windows, softcap, sinks, the query temperature, Qwen3-Next's output
// gate), MLA (kv_lora_rank <= 512, qk_nope_head_dim <= 512, qk_rope_head_dim <= 128, a 16-bit latent cache),
// Mamba-2 (state size <= 256, no in_proj multipliers), Gated DeltaNet or KDA (head dims <= 128) or LFM2's short
// conv, and a gated or plain MLP or a softmax / DeepSeek / gpt-oss MoE (biased routers and experts too), either
// sublayer possibly absent, with or without input norms, post-sublayer norms, parallel blocks, mean-centred norms
// and DecoderOptions' multipliers and softcap; it refuses postnorm (MiniMax) blocks, the other mixers and head dims
// other than 64 / 128 / 256. Weights and token tables of every format the CPU computes with go up (device_weights.h,
// make_device_embedding). `kv_dtype`: the pool's cache dtype on the device.
void check_decoder_runs_on_cuda(const DecoderParts& parts, DType kv_dtype = DType::bf16);

// Whether the output head is the embedding table itself, held as bf16 / f16 rows (a tied checkpoint borrowed as
// stored): the runner multiplies by the embedding's device copy instead of uploading the table twice.
bool head_shares_embedding(const DecoderParts& parts);

// Byte offsets of a step's metadata in its one staging buffer and its device copy: tokens and positions int32
// [T], then one int64 slot_mapping [T] per block group (window layers have their own), then the sequences' state
// slots int32 [S] (Batch::state_slots: where the recurrent mixers' rows of the pool's state slabs are). Each array
// starts on a 16-byte boundary.
struct StepLayout {
  size_t tokens = 0, positions = 0;
  std::vector<size_t> slot_mapping;  // per block group
  size_t state_slots = 0;
  size_t bytes = 0;
};
StepLayout plan_step_layout(int64_t num_tokens, int64_t block_groups, int64_t num_seqs);
// Writes the batch's arrays into `staging` (resized to layout.bytes) where `layout` says.
void pack_step(const Batch& batch, const StepLayout& layout, std::vector<uint8_t>& staging);

// Batch-size buckets of the decode steps replayed from CUDA graphs (step_graphs.h): a step of `seqs` one-token
// sequences is padded to 1, 2, 4, 8, 16, 32 or 64 sequences, or the next multiple of 64, so that steps of nearby
// sizes share one graph.
int64_t decode_bucket(int64_t seqs);
// Whether padding applies to `batch`: every sequence cached (context_lens > 0) with one new token, and the
// requested rows every token in order (a decode step's logits).
bool pads_to_bucket(const Batch& batch, std::span<const int64_t> rows);
// `batch` (pads_to_bucket) grown to `bucket` sequences in `padded`: each pad is token 0 at position 0 after one
// cached token, its block table [0, -1, ...] (a decode over block 0, whatever it holds: a pad's rows are never
// read), its slot -1 (the K/V write skips it) and its state slot -1 (the recurrent mixers' in-place decode skips it:
// device_conv_state.h). `padded`'s lists keep their capacity from step to step.
void pad_decode_batch(const Batch& batch, int64_t bucket, Batch& padded);

// The step a GPU runner computes for `requested` and its logits rows: as given or, with graphs on and a decode step
// (pads_to_bucket), padded to its bucket, so that nearby sizes share a graph. The padded batch and rows (every
// token's, the pads' after the requested ones) are held here, their lists' capacity kept from step to step.
class DecodePadding {
 public:
  // Returns the batch to run and points `rows` at its logits rows.
  const Batch& step(const Batch& requested, std::span<const int64_t>& rows, bool graphs);

 private:
  Batch padded_;
  std::vector<int64_t> rows_;
};

// One attention launch of a step, over consecutive sequences of the batch and their packed query rows.
//  prefill: sequences with nothing cached before this step (context_lens 0); their keys are their own new
//           tokens', read from the step's contiguous K/V (the CUDA prefill takes contiguous varlen K/V only),
//           one varlen call; cu_seqlens relative to first_row.
//  decode:  sequences with a cached context, each bringing `tq` <= kMaxDecodeQueries queries, over the paged
//           cache (the CUDA decode takes Tq > 1 bottom-right-aligned queries). A longer chunk after a cached
//           prefix (chunked prefill, prefix-cache hits) is a run of single-sequence decode calls of up to
//           kMaxDecodeQueries queries each, each seeing the keys up to its last query (cache_seqlens cut there).
struct AttentionCall {
  enum class Kind : uint8_t { prefill, decode };
  Kind kind = Kind::prefill;
  int64_t first_seq = 0, num_seqs = 0;
  int64_t first_row = 0, rows = 0;
  int64_t tq = 0;                      // decode: queries per sequence
  std::vector<int32_t> cu_seqlens;     // prefill: [num_seqs + 1] from 0
  std::vector<int32_t> cache_seqlens;  // decode: [num_seqs] keys each call's sequences see
};
// cu_seqlens [S + 1] and context_lens [S] as the Batch holds them.
std::vector<AttentionCall> plan_attention_calls(std::span<const int32_t> cu_seqlens,
                                                std::span<const int32_t> context_lens);

}  // namespace attnzoo
