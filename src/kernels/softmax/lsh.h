#pragma once
// Reformer's LSH self-attention (Kitaev, Kaiser, Levskaya 2020), computed as transformers' LSHSelfAttention
// computes it, so that its numerics can be compared with that module's.
//
// Shared QK: one projection `qk` [B, T, H, D] serves as the queries and, length-normalised, as the keys:
// key_j = qk_j / sqrt(mean(qk_j^2) + 1e-6) / sqrt(D) (about qk_j / |qk_j|); scores are query . key, unscaled.
// Hashing (angular LSH): in round r, token t's bucket is argmax over [x R, -x R] with x = qk[b, t, h] and
// R = rotations[h, :, r, :] ([D, num_buckets / 2], random rotations the caller draws, as transformers draws them
// with torch.randn). Each round sorts the tokens by (bucket, position); the rounds' sorted orders are laid end
// to end (num_hashes * T slots) and cut into chunks of chunk_length slots (the last may be shorter). A query
// sees the keys of its own chunk and of the chunk before it, cyclically (chunk 0's previous chunk is the last
// one, so round r's first chunk looks back into round r - 1, as in transformers' look_adjacent); a position
// that appears twice there counts twice. Masks: causal hides keys after the query; the query's own position
// scores -1e5 instead of its dot product (transformers' self_mask_value), so a token attends to itself only
// when nothing else is visible. Each round gives an output o_r and its log-sum-exp lse_r; the rounds combine
// as sum_r o_r exp(lse_r - logsumexp_r lse_r). When T <= chunk_length, hashing is skipped and every token sees
// every (causally visible) token once, with the same self rule: transformers' "standard self-attention" case.
// With T a multiple of chunk_length this is transformers' computation exactly; other lengths extend it by the
// shorter last chunk (transformers pads such inputs at the model level instead).
#include <cstdint>

#include "core/tensor.h"

namespace attnzoo {

struct LshOptions {
  int64_t chunk_length = 64;  // transformers' lsh_attn_chunk_length (one chunk before, none after)
  bool causal = false;        // transformers' is_decoder
};

// What the attention kernels read, validated: qk [B, T, H, D], v [B, T, H, Dv], out [B, T, H, Dv] (f32 / bf16 /
// f16, head_dim contiguous), buckets int32 [B, H, num_hashes, T] contiguous with values in [0, num_buckets).
struct LshProblem {
  int64_t B = 0, T = 0, H = 0, D = 0, Dv = 0, num_hashes = 0, num_buckets = 0;
  LshOptions opts;
  TensorView qk, v, out;
  const int32_t* buckets = nullptr;

  // Element offset of token t, head h of batch b in view x.
  static int64_t row(const TensorView& x, int64_t b, int64_t t, int64_t h) {
    return b * x.strides[0] + t * x.strides[1] + h * x.strides[2];
  }
  const int32_t* head_buckets(int64_t b, int64_t h) const { return buckets + (b * H + h) * num_hashes * T; }
  // Whether the chunked LSH path applies (else: transformers' standard self-attention).
  bool hashed() const { return T > opts.chunk_length; }
};

// Throws ArgumentError / DTypeError naming the tensor; num_buckets is taken as max(buckets) + 1.
LshProblem make_lsh_problem(const TensorView& qk, const TensorView& v, const TensorView& buckets,
                            const TensorView& out, const LshOptions& opts);

// The self score (transformers' self_mask_value for float32) and the key normalisation's epsilon.
constexpr double kLshSelfScore = -1e5;
constexpr double kLshNormEpsilon = 1e-6;

// buckets [B, H, num_hashes, T] int32 (written) from qk [B, T, H, D] and rotations f32 [H, D, num_hashes,
// num_buckets / 2]; buckets are in [0, num_buckets), without transformers' per-round offsets. f32 products
// (the tile GEMM): a token whose two best rotations tie within rounding may land in either bucket, as between
// two torch builds.
void lsh_hash(const TensorView& qk, const TensorView& rotations, const TensorView& buckets);
// lsh_hash's argument checks alone (ArgumentError / DTypeError naming the tensor).
void check_lsh_hash_args(const TensorView& qk, const TensorView& rotations, const TensorView& buckets);

// The fast path: per (batch, head), a counting sort by bucket, then each chunk as one tile (queries x the keys
// of two chunks) through the tile GEMM, the rounds merged by their log-sum-exp as they finish.
void lsh_attention(const LshProblem& p);

// The definition above with double accumulation, written for reading: sorted with std::sort, every query's key
// set listed explicitly. Slow on purpose.
void lsh_attention_reference(const LshProblem& p);

}  // namespace attnzoo
