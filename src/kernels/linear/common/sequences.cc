#include "kernels/linear/common/sequences.h"

#include <string>

#include "core/error.h"

namespace attnzoo {

SequenceSpans make_sequence_spans(int64_t B, int64_t T, const int32_t* cu_seqlens, int64_t cu_len) {
  SequenceSpans s;
  if (!cu_seqlens) {
    for (int64_t b = 0; b < B; ++b) {
      s.begin.push_back(b * T);
      s.length.push_back(T);
    }
    return s;
  }
  require(B == 1, "cu_seqlens", "needs batch size 1 (packed sequences), got batch " + std::to_string(B));
  require(cu_len >= 2, "cu_seqlens", "needs at least 2 entries");
  require(cu_seqlens[0] == 0, "cu_seqlens", "must start at 0");
  for (int64_t i = 0; i + 1 < cu_len; ++i) {
    require(cu_seqlens[i + 1] >= cu_seqlens[i], "cu_seqlens",
            "must be non-decreasing (entry " + std::to_string(i + 1) + ")");
    s.begin.push_back(cu_seqlens[i]);
    s.length.push_back(cu_seqlens[i + 1] - cu_seqlens[i]);
  }
  require(cu_seqlens[cu_len - 1] == T, "cu_seqlens",
          "last entry " + std::to_string(cu_seqlens[cu_len - 1]) + " must equal the token count " + std::to_string(T));
  return s;
}

std::vector<int64_t> packed_offsets(const SequenceSpans& s, int64_t B, int64_t T) {
  const int64_t N = s.count();
  bool padded = N == B;
  for (int64_t n = 0; padded && n < N; ++n) padded = s.begin[size_t(n)] == n * T && s.length[size_t(n)] == T;
  if (padded || N == 0) return {};
  std::vector<int64_t> offsets(s.begin.begin(), s.begin.end());
  offsets.push_back(s.begin.back() + s.length.back());  // make_sequence_spans: contiguous spans
  return offsets;
}

}  // namespace attnzoo
