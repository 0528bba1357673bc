#pragma once
// The sequences of a linear-family call: padded [B, T, ...] gives B sequences of length T; packed with
// cu_seqlens (B must be 1) gives N sequences at the given token offsets. Recurrent state is indexed by
// sequence: [N, HV, K, V].
#include <cstdint>
#include <vector>

namespace attnzoo {

struct SequenceSpans {
  std::vector<int64_t> begin;   // first token of each sequence, as a row index into the flattened [B*T] tokens
  std::vector<int64_t> length;  // tokens in each sequence
  int64_t count() const { return int64_t(begin.size()); }
};

// Validates cu_seqlens (starts at 0, non-decreasing, ends at T, B == 1) and names the argument on error.
SequenceSpans make_sequence_spans(int64_t B, int64_t T, const int32_t* cu_seqlens, int64_t cu_len);

// The N + 1 token offsets a device kernel needs to find packed sequences, or nothing when the spans are the
// padded ones (sequence n is rows [n T, n T + T)), which a kernel computes without metadata to upload.
std::vector<int64_t> packed_offsets(const SequenceSpans& s, int64_t B, int64_t T);

}  // namespace attnzoo
