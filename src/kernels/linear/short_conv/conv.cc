// Vectorised causal short convolution. One task per (sequence, block of 64 channels): the last W inputs of the
// block live in a ring of f32 rows, so every output row is W fused multiply-adds per vector of channels and
// each input is converted once.
#include <algorithm>
#include <cmath>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/linear/short_conv/conv_problem.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/short_conv/conv.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kBlock = 64;

struct ConvScratch {
  AlignedBuffer<float> ring, weight, bias, out;
};

void RunConvTask(const ConvProblem& p, int64_t task) {
  static thread_local ConvScratch sc;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const int64_t blocks = (p.D + kBlock - 1) / kBlock;
  const int64_t n = task / blocks, d0 = (task % blocks) * kBlock, nb = std::min(kBlock, p.D - d0);
  const int64_t W = p.W, S = p.S, D = p.D;
  const int64_t begin = p.seqs.begin[size_t(n)], len = p.seqs.length[size_t(n)];
  sc.ring.resize(size_t(W * kBlock));
  sc.weight.resize(size_t(W * kBlock));
  sc.bias.resize(kBlock);
  sc.out.resize(kBlock);
  std::fill(sc.weight.data(), sc.weight.data() + W * kBlock, 0.f);
  std::fill(sc.bias.data(), sc.bias.data() + kBlock, 0.f);
  std::fill(sc.ring.data(), sc.ring.data() + W * kBlock, 0.f);
  for (int64_t w = 0; w < W; ++w) std::copy_n(p.weight_t.data() + w * D + d0, nb, sc.weight.data() + w * kBlock);
  std::copy_n(p.bias.data() + d0, nb, sc.bias.data());
  // Inputs before the sequence start: position t < 0 sits in ring slot (t + W - 1) % W.
  if (p.initial_state)
    for (int64_t t = -(W - 1); t < 0; ++t)
      for (int64_t j = 0; j < nb; ++j)
        sc.ring[size_t(((t + W - 1) % W) * kBlock + j)] = p.initial_state[(n * D + d0 + j) * S + (S + t)];

  const size_t x_elem = dtype_size(p.x_dtype), y_elem = dtype_size(p.y_dtype);
  for (int64_t t = 0; t < len; ++t) {
    float* slot = sc.ring.data() + ((t + W - 1) % W) * kBlock;
    convert_to_f32(static_cast<const char*>(p.x) + ((begin + t) * D + d0) * int64_t(x_elem), p.x_dtype, slot,
                   size_t(nb));
    for (size_t j = 0; j < size_t(kBlock); j += L) {
      auto acc = hn::LoadU(d, sc.bias.data() + j);
      for (int64_t w = 0; w < W; ++w)
        acc = hn::MulAdd(hn::LoadU(d, sc.weight.data() + w * kBlock + j),
                         hn::LoadU(d, sc.ring.data() + ((t + w) % W) * kBlock + j), acc);
      if (p.activation == ConvActivation::silu)
        acc = hn::Div(acc, hn::Add(hn::Set(d, 1.f), hn::Exp(d, hn::Neg(acc))));
      hn::StoreU(acc, d, sc.out.data() + j);
    }
    convert_from_f32(sc.out.data(), static_cast<char*>(p.y) + ((begin + t) * D + d0) * int64_t(y_elem), p.y_dtype,
                     size_t(nb));
  }

  if (p.final_state) {
    // Increasing s reads state entries at or after s, so an aliased (in-place) state is never read after
    // being overwritten.
    for (int64_t j = 0; j < nb; ++j) {
      float* fs = p.final_state + (n * D + d0 + j) * S;
      const float* is = p.initial_state ? p.initial_state + (n * D + d0 + j) * S : nullptr;
      for (int64_t s = 0; s < S; ++s) {
        const int64_t t = len - S + s;
        fs[s] = t >= 0 ? load_as_f32(p.x, p.x_dtype, (begin + t) * D + d0 + j) : (is ? is[S + t] : 0.f);
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(RunConvTask);

void run_causal_conv1d(const ConvProblem& p) {
  active_target();
  const int64_t blocks = (p.D + 63) / 64;
  ThreadPool::global().parallel_for(p.seqs.count() * blocks, [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(RunConvTask)(p, task);
  });
}

}  // namespace attnzoo
#endif
