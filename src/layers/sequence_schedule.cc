#include "layers/sequence_schedule.h"

#include <cmath>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/linear/common/ssm_args.h"

namespace attnzoo {

std::vector<float> widen_vector(const TensorView& t, int64_t n, const std::string& name) {
  require(!t.empty(), name.c_str(), "is required");
  require(t.numel() == n, name.c_str(), "expected " + std::to_string(n) + " values, got shape " + t.shape_str());
  return ssm::to_f32_vector(t);
}

void for_each_sequence(const Batch& batch, int64_t decode_tokens, const std::function<void(int64_t)>& fn) {
  const int64_t S = batch.num_sequences();
  bool all_decode = true;
  for (int64_t s = 0; s < S; ++s) all_decode = all_decode && batch.seq_len(s) <= decode_tokens;
  if (all_decode && S > 1)
    ThreadPool::global().parallel_for(S, [&](int64_t s, int) { fn(s); });
  else
    for (int64_t s = 0; s < S; ++s) fn(s);
}

std::vector<float> head_state_norms(const float* state, int64_t heads, int64_t per_head) {
  std::vector<float> norms(size_t(heads), 0.f);
  for (int64_t h = 0; h < heads; ++h) {
    double ss = 0;
    const float* s = state + h * per_head;
    for (int64_t i = 0; i < per_head; ++i) ss += double(s[i]) * s[i];
    norms[size_t(h)] = float(std::sqrt(ss));
  }
  return norms;
}

TensorView depthwise_conv_weight(const TensorView& cw, const TensorView& bias, int64_t channels, int64_t kernel,
                                 const std::string& name) {
  const bool ok = (cw.ndim == 3 && cw.shape[0] == channels && cw.shape[1] == 1 && cw.shape[2] == kernel) ||
                  (cw.ndim == 2 && cw.shape[0] == channels && cw.shape[1] == kernel);
  require(ok && cw.is_contiguous(), (name + ".conv1d.weight").c_str(),
          "expected [" + std::to_string(channels) + ", 1, " + std::to_string(kernel) + "], got " + cw.shape_str());
  if (!bias.empty())
    require(bias.ndim == 1 && bias.shape[0] == channels, (name + ".conv1d.bias").c_str(),
            "expected [" + std::to_string(channels) + "], got " + bias.shape_str());
  return TensorView::contiguous(cw.data, cw.dtype, {channels, kernel});
}

}  // namespace attnzoo

namespace attnzoo {

CacheSpec conv_state_spec(int64_t conv_elems, int64_t state_elems) {
  return CacheSpec::state(checked_add(conv_tail_floats(conv_elems), state_elems, "recurrent state"));
}

}  // namespace attnzoo
