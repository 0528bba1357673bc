#include "layers/rwkv7_state.h"

#include <algorithm>

namespace attnzoo {

void rwkv7_token_shift(const float* x, const Batch& batch, int64_t dim, const std::function<float*(int64_t)>& shift_of,
                       float* delta) {
  for (int64_t s = 0; s < batch.num_sequences(); ++s) {
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
    if (n == 0) continue;
    float* shift = shift_of(s);
    for (int64_t t = b; t < b + n; ++t) {
      const float* prev = t == b ? shift : x + (t - 1) * dim;
      const float* cur = x + t * dim;
      float* d = delta + t * dim;
      for (int64_t i = 0; i < dim; ++i) d[i] = prev[i] - cur[i];
    }
    std::copy_n(x + (b + n - 1) * dim, dim, shift);
  }
}

}  // namespace attnzoo
