#pragma once
#include <vector>

#include "kernels/linear/common/sequences.h"
#include "kernels/linear/rwkv4/rwkv4.h"

namespace attnzoo {

struct Rwkv4Problem {
  int64_t batch = 0, T = 0, C = 0;
  SequenceSpans seqs;
  std::vector<float> decay;  // -exp(w)
  std::vector<float> bonus;  // u
  const void *k = nullptr, *v = nullptr;
  DType k_dtype{}, v_dtype{};
  const float* h0 = nullptr;
  float* ht = nullptr;
  void* out = nullptr;
  DType out_dtype{};
};

Rwkv4Problem make_rwkv4_problem(const Rwkv4Args& a);

}  // namespace attnzoo
