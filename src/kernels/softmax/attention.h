#pragma once
// Softmax attention, the public C++ entry points. Layout [batch, time, heads, head_dim]; packed variable
// length batches through VarlenInfo (flash-attn's cu_seqlens). Inputs f32 / bf16 / f16, f32 accumulation,
// output in `out`'s dtype. Rows that see no key at all produce zeros (flash-attn's convention).
#include "kernels/softmax/problem.h"

namespace attnzoo {

// Tiled online-softmax prefill (FlashAttention-2 schedule) on the global thread pool.
void attention_prefill(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                       const AttentionOptions& opts, const VarlenInfo& varlen = {});

// The same over a KV cache that already holds the queries' own keys (chunked / prefix-cached prefill):
// flash_attn_with_kvcache, or flash_attn_varlen_func with block_table and seqused_k. q padded [B, Tq, Hq, D]
// or packed [total_q, Hq, D] with varlen.cu_seqlens_q (varlen.cu_seqlens_k must stay null); cache paged
// [num_blocks, block_size, Hkv, D] + block_table [B, max_blocks_per_seq] (any block size, blocks in any
// order) or contiguous [B, S_max, Hkv, D]; cache.cache_seqlens[b] keys for sequence b, its Tq_b queries
// being the last Tq_b of them. Every option (causal, window, softcap, sinks, ALiBi, block mask) applies.
void attention_prefill(const TensorView& q, const KvCacheView& cache, const TensorView& out,
                       const AttentionOptions& opts, const VarlenInfo& varlen = {});

// A validated problem (make_prefill_problem / make_cached_prefill_problem) run where its tensors live: the CPU
// kernel, or the CUDA one. What the entries above call; front ends that validate first (the Python bindings,
// which scan inputs between the two steps) call it too.
void attention_prefill(const AttentionProblem& p);

// The plain definition with double accumulation: the yardstick for tests, slow on purpose.
void attention_prefill_reference(const AttentionProblem& p);

// The fast kernel on an already validated problem (what attention_prefill calls after checking).
void attention_prefill_run(const AttentionProblem& p);

}  // namespace attnzoo
