#pragma once
// A validated decode problem and how it is cut into split-K chunks. Shared by the fast kernel, the reference
// and the tests, so all of them read the cache through the same addressing: a contiguous cache is a paged one
// with one block of S_max tokens per sequence and the identity block table.
#include <cstdint>
#include <vector>

#include "kernels/softmax/decode.h"
#include "kernels/softmax/kv_quant.h"

namespace attnzoo {

struct DecodeProblem {
  Device device{};  // where q, out, the caches and their scales live
  int64_t B = 0, Tq = 0, Hq = 0, Hkv = 0, D = 0, Dv = 0;
  float scale = 1.f;
  AttentionOptions opts;

  const void* q = nullptr;
  void* o = nullptr;
  DType q_dtype = DType::f32, o_dtype = DType::f32;
  int64_t q_batch = 0, q_token = 0, q_head = 0;  // element strides
  int64_t o_batch = 0, o_token = 0, o_head = 0;

  const void* k = nullptr;
  const void* v = nullptr;
  DType kv_dtype = DType::f32;
  int64_t k_block = 0, k_token = 0, k_head = 0;  // block = batch row for a contiguous cache
  int64_t v_block = 0, v_token = 0, v_head = 0;
  int64_t block_size = 0;                         // S_max for a contiguous cache
  const int32_t* seqlens = nullptr;               // [B]
  const int32_t* block_table = nullptr;           // [B, max_blocks_per_seq], nullptr: contiguous
  int64_t max_blocks_per_seq = 0;
  KvScaleView k_scale, v_scale;  // int8 / fp8 caches (the same view twice for MLA's shared latent)

  int64_t group() const { return Hq / Hkv; }
  int64_t rows() const { return Tq * group(); }  // query rows sharing one kv head: (token, head in group)
  int64_t physical_block(int64_t b, int64_t logical) const {
    return block_table ? block_table[b * max_blocks_per_seq + logical] : b;
  }
  // Element offsets of key / value `pos` of sequence b, kv head hk (slow path: reference and set-up).
  int64_t k_offset(int64_t b, int64_t pos, int64_t hk) const {
    return physical_block(b, pos / block_size) * k_block + (pos % block_size) * k_token + hk * k_head;
  }
  int64_t v_offset(int64_t b, int64_t pos, int64_t hk) const {
    return physical_block(b, pos / block_size) * v_block + (pos % block_size) * v_token + hk * v_head;
  }
  // The dequantization scale of key / value `pos`, kv head hk (1 for an unquantized cache).
  float k_scale_at(int64_t b, int64_t pos, int64_t hk) const {
    return k_scale.data ? k_scale.at(physical_block(b, pos / block_size), pos % block_size, hk) : 1.f;
  }
  float v_scale_at(int64_t b, int64_t pos, int64_t hk) const {
    return v_scale.data ? v_scale.at(physical_block(b, pos / block_size), pos % block_size, hk) : 1.f;
  }
};

// Validates every argument (shapes, dtypes, strides, lengths, block ids, options) and names the offending one.
DecodeProblem make_decode_problem(const TensorView& q, const KvCacheView& cache, const TensorView& out,
                                  const AttentionOptions& opts);

// One unit of parallel work: keys [k_begin, k_end) of sequence b against kv heads [hk_begin, hk_begin +
// heads_per_task), with all Tq * G query rows of each of those heads.
struct DecodeChunk {
  int32_t b, hk_begin;
  int64_t k_begin, k_end;
  int64_t slot;  // -1: the only chunk of its (b, heads), writes `out` directly; else index of its partial result
};

struct DecodePlan {
  int64_t block_k = 64;  // keys per tile inside a chunk
  int64_t heads_per_task = 1;  // kv heads a task reads side by side (all of them unless that starves threads)
  std::vector<DecodeChunk> chunks;  // longest first
  // For each (b, heads) split into several chunks: its first partial slot and how many chunks it has.
  struct Merge {
    int32_t b, hk_begin;
    int64_t first_slot, num_slots;
  };
  std::vector<Merge> merges;
  int64_t num_slots = 0;
};

// Chunks of at least min_chunk keys over all kv heads, as many as keep num_threads busy (about 4 tasks per
// thread); only when sequences are too short for that are the kv heads split across tasks too. invariant:
// chunks end at the multiples of min_chunk instead and every (sequence, heads) is merged, so that a query's
// result does not depend on the batch or the threads (core/batch_invariance.h).
DecodePlan make_decode_plan(const DecodeProblem& p, int num_threads, int64_t min_chunk = 256,
                            bool invariant = false);
// The same into `plan`, whose vectors keep their capacity: a warm decode step allocates nothing.
void make_decode_plan(const DecodeProblem& p, int num_threads, DecodePlan& plan, int64_t min_chunk = 256,
                      bool invariant = false);

// Partial results of a split chunk: m[rows], l[rows], o[rows][Dv] with rows = heads_per_task * Tq * G.
// Writes the merged, normalised rows of one Merge entry into `out`.
void merge_decode_chunks(const DecodeProblem& p, const DecodePlan& plan, const DecodePlan::Merge& merge,
                         const float* partials);

void attention_decode_reference(const DecodeProblem& p);
void attention_decode_run(const DecodeProblem& p);
// A validated problem run where its tensors live (the CPU kernel above, or the CUDA one): what attention_decode
// calls after make_decode_problem.
void attention_decode(const DecodeProblem& p);

}  // namespace attnzoo
