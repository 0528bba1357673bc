// Vectorised causal short convolution, time-major. One task per (sequence, block of kRows tokens, block of
// kChunk channels): each input row segment is converted once into a ring of the last W rows, and every output
// row segment is W fused multiply-adds per vector of channels. Rows are read and written in memory order
// (kChunk contiguous floats each); the first version walked 64 channels down all T rows, one 256-byte piece
// per row, and ran at ~0.4 GB/s on T=1024, D=4096 (a TLB and cache miss per row); this one streams ~19 GB/s
// read+write there with silu (2-core Zen 5 VM). The final state is written
// in a second pass, because it may alias the initial state that other token blocks of the sequence still read.
#include <algorithm>
#include <cmath>
#include <vector>

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

// foreach_target re-includes this file once per target: define the shared pieces once.
#ifndef ATTNZOO_CONV_TASK_DEFINED
#define ATTNZOO_CONV_TASK_DEFINED
namespace attnzoo {
namespace {

constexpr int64_t kRows = 64;     // tokens per task
constexpr int64_t kChunk = 1024;  // channels per task: 4 KiB of each row, W + 1 rows of it stay in L1

struct ConvTask {
  int64_t n, t0, d0;
};

}  // namespace
}  // namespace attnzoo
#endif

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct ConvScratch {
  AlignedBuffer<float> ring, weight, bias, out;
};

void RunConvTask(const ConvProblem& p, const ConvTask& task) {
  static thread_local ConvScratch sc;
  const hn::ScalableTag<float> d;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t W = p.W, S = p.S, D = p.D, n = task.n, d0 = task.d0;
  const int64_t nb = std::min(kChunk, D - d0), nbp = (nb + L - 1) / L * L;
  const int64_t begin = p.seqs.begin[size_t(n)], len = p.seqs.length[size_t(n)];
  const int64_t t0 = task.t0, t1 = std::min(len, t0 + kRows);
  sc.ring.resize(size_t(W * kChunk));
  sc.weight.resize(size_t(W * kChunk));
  sc.bias.resize(kChunk);
  sc.out.resize(kChunk);
  // Padding lanes past nb compute zeros that are never stored.
  for (int64_t w = 0; w < W; ++w) {
    float* wr = sc.weight.data() + w * kChunk;
    std::copy_n(p.weight_t.data() + w * D + d0, nb, wr);
    std::fill(wr + nb, wr + nbp, 0.f);
  }
  std::copy_n(p.bias.data() + d0, nb, sc.bias.data());
  std::fill(sc.bias.data() + nb, sc.bias.data() + nbp, 0.f);

  const size_t x_elem = dtype_size(p.x_dtype), y_elem = dtype_size(p.y_dtype);
  // Input row t of the sequence (t < 0: the initial state, or zeros) into its ring slot, t mod W.
  auto load_row = [&](int64_t t) {
    float* slot = sc.ring.data() + ((t % W + W) % W) * kChunk;
    if (t >= 0) {
      convert_to_f32(static_cast<const char*>(p.x) + ((begin + t) * D + d0) * int64_t(x_elem), p.x_dtype, slot,
                     size_t(nb));
    } else if (p.initial_state && t >= -S) {
      for (int64_t j = 0; j < nb; ++j) slot[j] = p.initial_state[(n * D + d0 + j) * S + (S + t)];
    } else {
      std::fill(slot, slot + nb, 0.f);
    }
    std::fill(slot + nb, slot + nbp, 0.f);
  };
  for (int64_t t = t0 - (W - 1); t < t0; ++t) load_row(t);
  const float* tap[16];  // W <= 16: the ring row of each tap, found once per output row (not per vector)
  for (int64_t t = t0; t < t1; ++t) {
    load_row(t);
    for (int64_t w = 0; w < W; ++w) {
      const int64_t src = t - (W - 1) + w;
      tap[w] = sc.ring.data() + ((src % W + W) % W) * kChunk;
    }
    for (int64_t j = 0; j < nbp; j += L) {
      auto acc = hn::Load(d, sc.bias.data() + j);
      for (int64_t w = 0; w < W; ++w)
        acc = hn::MulAdd(hn::Load(d, sc.weight.data() + w * kChunk + j), hn::Load(d, tap[w] + j), acc);
      if (p.activation == ConvActivation::silu)
        acc = hn::Div(acc, hn::Add(hn::Set(d, 1.f), hn::Exp(d, hn::Neg(acc))));
      hn::Store(acc, d, sc.out.data() + j);
    }
    convert_from_f32(sc.out.data(), static_cast<char*>(p.y) + ((begin + t) * D + d0) * int64_t(y_elem), p.y_dtype,
                     size_t(nb));
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
  const int64_t chunks = (p.D + kChunk - 1) / kChunk;
  std::vector<ConvTask> tasks;
  for (int64_t n = 0; n < p.seqs.count(); ++n)
    for (int64_t t0 = 0; t0 < p.seqs.length[size_t(n)]; t0 += kRows)
      for (int64_t c = 0; c < chunks; ++c) tasks.push_back({n, t0, c * kChunk});
  ThreadPool::global().parallel_for(int64_t(tasks.size()), [&](int64_t i, int) {
    HWY_DYNAMIC_DISPATCH(RunConvTask)(p, tasks[size_t(i)]);
  });
  if (!p.final_state) return;
  // The last S inputs of (initial state ++ sequence), per channel; increasing s reads entries at or after s, so
  // a final state aliasing the initial state is never read after being overwritten.
  const int64_t D = p.D, S = p.S;
  ThreadPool::global().parallel_for(p.seqs.count() * chunks, [&](int64_t i, int) {
    const int64_t n = i / chunks, d0 = (i % chunks) * kChunk, nb = std::min(kChunk, D - d0);
    const int64_t begin = p.seqs.begin[size_t(n)], len = p.seqs.length[size_t(n)];
    for (int64_t j = 0; j < nb; ++j) {
      float* fs = p.final_state + (n * D + d0 + j) * S;
      const float* is = p.initial_state ? p.initial_state + (n * D + d0 + j) * S : nullptr;
      for (int64_t s = 0; s < S; ++s) {
        const int64_t t = len - S + s;
        fs[s] = t >= 0 ? load_as_f32(p.x, p.x_dtype, (begin + t) * D + d0 + j) : (is ? is[S + t] : 0.f);
      }
    }
  });
}

}  // namespace attnzoo
#endif
