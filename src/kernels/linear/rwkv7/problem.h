#pragma once
#include "kernels/linear/common/sequences.h"
#include "kernels/linear/rwkv7/rwkv7.h"

namespace attnzoo {

struct Rwkv7Problem {
  int64_t batch = 0, T = 0, H = 0, K = 0, V = 0;
  SequenceSpans seqs;
  const void *r = nullptr, *w = nullptr, *k = nullptr, *v = nullptr, *a = nullptr, *b = nullptr;
  DType r_dtype{}, w_dtype{}, k_dtype{}, v_dtype{}, a_dtype{}, b_dtype{};
  float scale = 1.f;
  const float* h0 = nullptr;
  float* ht = nullptr;
  void* o = nullptr;
  DType o_dtype{};
};

Rwkv7Problem make_rwkv7_problem(const Rwkv7Args& a);

}  // namespace attnzoo
