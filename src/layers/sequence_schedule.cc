#include "layers/sequence_schedule.h"

#include <algorithm>
#include <cmath>

#include "core/aligned_buffer.h"
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

PrefillGroup prefill_group(const Batch& batch, int64_t decode_tokens, const BlockTables& tables) {
  PrefillGroup g;
  const int64_t S = batch.num_sequences();
  for (int64_t s = 0; s < S; ++s) {
    const int64_t n = batch.seq_len(s);
    if (n <= decode_tokens) continue;
    g.sequences.push_back(s);
    g.cu_seqlens.push_back(int32_t(g.cu_seqlens.back() + n));
    g.cache_seqlens.push_back(batch.cache_seqlens[size_t(s)]);
    g.block_tables.insert(g.block_tables.end(), tables.block_table(s), tables.block_table(s) + tables.max_blocks);
  }
  g.whole_batch = g.num_sequences() == S;
  return g;
}

void run_packed(const PrefillGroup& group, const Batch& batch, const float* q, int64_t q_row, float* out,
                int64_t out_row, const std::function<void(float*, float*)>& fn) {
  if (group.whole_batch) {
    fn(const_cast<float*>(q), out);
    return;
  }
  const int64_t M = group.num_tokens(), n = group.num_sequences();
  AlignedBuffer<float> packed_q(size_t(M * q_row)), packed_out(size_t(M * out_row));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = group.sequences[size_t(i)];
    std::copy_n(q + batch.seq_begin(s) * q_row, batch.seq_len(s) * q_row,
                packed_q.data() + group.cu_seqlens[size_t(i)] * q_row);
  }
  fn(packed_q.data(), packed_out.data());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = group.sequences[size_t(i)];
    std::copy_n(packed_out.data() + group.cu_seqlens[size_t(i)] * out_row, batch.seq_len(s) * out_row,
                out + batch.seq_begin(s) * out_row);
  }
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
