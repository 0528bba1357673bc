#include "layers/short_conv_mixer.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/linear/short_conv/short_conv.h"

namespace attnzoo {

ShortConvMixer::ShortConvMixer(int64_t hidden, Linear in_proj, Linear out_proj, const TensorView& conv_weight,
                               const TensorView& conv_bias, const std::string& name)
    : hidden_(hidden), in_proj_(std::move(in_proj)), out_proj_(std::move(out_proj)), conv_bias_(conv_bias) {
  require(hidden > 0, "hidden", "must be positive");
  auto check = [](const Linear& l, int64_t out, int64_t in, const std::string& n) {
    require(l.out_features() == out && l.in_features() == in, n.c_str(),
            "expected weight [" + std::to_string(out) + ", " + std::to_string(in) + "], got " + l.shape_str());
  };
  check(in_proj_, 3 * hidden, hidden, name + ".in_proj.weight");
  check(out_proj_, hidden, hidden, name + ".out_proj.weight");
  const TensorView& w = conv_weight;
  const bool ok = ((w.ndim == 3 && w.shape[1] == 1) || w.ndim == 2) && w.shape[0] == hidden && w.is_contiguous();
  require(ok, (name + ".conv.weight").c_str(),
          "expected [" + std::to_string(hidden) + ", 1, L], got " + w.shape_str());
  kernel_ = w.shape[w.ndim - 1];
  require(kernel_ >= 1 && kernel_ <= 16, (name + ".conv.weight").c_str(), "conv width must be in [1, 16]");
  conv_weight_ = TensorView::contiguous(w.data, w.dtype, {hidden, kernel_});
  if (!conv_bias_.empty())
    require(conv_bias_.ndim == 1 && conv_bias_.shape[0] == hidden, (name + ".conv.bias").c_str(),
            "expected [" + std::to_string(hidden) + "], got " + conv_bias_.shape_str());
}

CacheSpec ShortConvMixer::spec(int64_t hidden, int64_t kernel) {
  return CacheSpec::state(checked_mul(hidden, state_len(kernel), "conv state"));
}

uint64_t ShortConvMixer::weight_bytes() const {
  return in_proj_.weight_bytes() + out_proj_.weight_bytes() +
         uint64_t(conv_weight_.numel()) * dtype_size(conv_weight_.dtype);
}

void ShortConvMixer::forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const {
  const int64_t T = batch.num_tokens(), nseq = batch.num_sequences(), Hd = hidden_, S = state_len();
  std::vector<float> proj(size_t(T * 3 * Hd)), bx(size_t(T * Hd)), conv(size_t(T * Hd));
  in_proj_.forward(x, T, proj.data());
  ThreadPool& pool = ThreadPool::global();
  pool.parallel_for(T, [&](int64_t t, int) {
    const float* row = proj.data() + t * 3 * Hd;
    for (int64_t i = 0; i < Hd; ++i) bx[size_t(t * Hd + i)] = row[i] * row[2 * Hd + i];
  });
  // One conv call for the whole ragged batch; the small per-sequence tails are gathered and scattered back.
  std::vector<float> tails(size_t(nseq * Hd * S));
  auto state = [&](int64_t s) {
    return memory.state(batch.state_slots[size_t(s)]);
  };
  for (int64_t s = 0; s < nseq; ++s) std::memcpy(tails.data() + s * Hd * S, state(s), size_t(Hd * S) * sizeof(float));
  CausalConv1dOptions o;
  o.bias = conv_bias_;
  o.initial_state = o.final_state = TensorView::contiguous(tails.data(), DType::f32, {nseq, Hd, S});
  o.cu_seqlens = batch.cu_seqlens.data();
  o.cu_seqlens_len = int64_t(batch.cu_seqlens.size());
  causal_conv1d(TensorView::contiguous(bx.data(), DType::f32, {1, T, Hd}), conv_weight_,
                TensorView::contiguous(conv.data(), DType::f32, {1, T, Hd}), o);
  for (int64_t s = 0; s < nseq; ++s) std::memcpy(state(s), tails.data() + s * Hd * S, size_t(Hd * S) * sizeof(float));
  pool.parallel_for(T, [&](int64_t t, int) {
    const float* c = proj.data() + t * 3 * Hd + Hd;
    float* y = conv.data() + t * Hd;
    for (int64_t i = 0; i < Hd; ++i) y[i] *= c[i];
  });
  out_proj_.forward(conv.data(), T, out);
}

}  // namespace attnzoo
