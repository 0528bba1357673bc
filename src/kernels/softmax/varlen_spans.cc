#include "kernels/softmax/varlen_spans.h"

#include <string>

#include "core/error.h"

namespace attnzoo {

std::vector<VarlenSpan> varlen_spans(const VarlenInfo& varlen, int64_t total_q, int64_t total_k,
                                     const char* keys_tensor, const char* keys) {
  auto str = [](int64_t v) { return std::to_string(v); };
  const int64_t n = varlen.num_seqs;
  require(n >= 1, "cu_seqlens", "needs at least 2 entries (one sequence)");
  const int32_t* cq = varlen.cu_seqlens_q;
  const int32_t* ck = varlen.cu_seqlens_k ? varlen.cu_seqlens_k : cq;
  const char* k_name = varlen.cu_seqlens_k ? "cu_seqlens_k" : "cu_seqlens";
  require(cq[0] == 0, "cu_seqlens", "must start at 0");
  require(ck[0] == 0, k_name, "must start at 0");
  std::vector<VarlenSpan> spans;
  for (int64_t s = 0; s < n; ++s) {
    require(cq[s + 1] >= cq[s], "cu_seqlens", [&] { return "must be non-decreasing (entry " + str(s + 1) + ")"; });
    require(ck[s + 1] >= ck[s], k_name, [&] { return "must be non-decreasing (entry " + str(s + 1) + ")"; });
    const int64_t Tq = cq[s + 1] - cq[s], Tk = ck[s + 1] - ck[s];
    require(Tq <= Tk, "cu_seqlens", [&] {
      return "sequence " + str(s) + " has more queries (" + str(Tq) + ") than " + keys + " (" + str(Tk) + ")";
    });
    spans.push_back({cq[s], Tq, ck[s], Tk});
  }
  require(cq[n] == total_q, "cu_seqlens", [&] {
    return "last entry " + str(cq[n]) + " must equal q's token count " + str(total_q);
  });
  require(ck[n] == total_k, k_name, [&] {
    return "last entry " + str(ck[n]) + " must equal " + keys_tensor + "'s token count " + str(total_k);
  });
  return spans;
}

}  // namespace attnzoo
