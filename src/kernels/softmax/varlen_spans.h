#pragma once
// The packed (cu_seqlens) form of a prefill's queries and keys, checked once for the attention and MLA problems.
#include <cstdint>
#include <vector>

#include "kernels/softmax/problem.h"

namespace attnzoo {

// One sequence of a packed batch: Tq queries from token q_start, Tk keys from token k_start.
struct VarlenSpan {
  int64_t q_start, Tq, k_start, Tk;
};

// cu_seqlens and cu_seqlens_k (the queries' own offsets when absent) turned into per-sequence spans, after
// checking that both start at 0, never decrease and end at total_q and total_k (the token count of `keys_tensor`,
// e.g. "k"), and that no sequence has more queries than keys (`keys`: what the key side holds, e.g. "latent
// rows"). ArgumentError names the offending argument.
std::vector<VarlenSpan> varlen_spans(const VarlenInfo& varlen, int64_t total_q, int64_t total_k,
                                     const char* keys_tensor, const char* keys);

}  // namespace attnzoo
