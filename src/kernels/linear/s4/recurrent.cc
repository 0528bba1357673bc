// The S4D / DSS recurrence, vectorized over channels: one task = (sequence, block of channels in f64 lanes),
// the modes looped inside each step with the state in L1. The state and the step run in f64 although inputs,
// outputs and stored states are f32: dA rounded to f32 carries a relative error of ~6e-8 that the recurrence
// compounds over the ~1 / (1 - |dA|) steps a mode remembers. With dt = 0.001 (S4D's smallest default step) that is
// 2000 steps, and a 16k-token f32 recurrence was measured 1.6e-5 (relative RMS) off the exact output, above the
// 1e-5 the forms must agree to; in f64 the drift is gone. Serves the decode step too (a scan of length 1).
#include <algorithm>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/linear/s4/problem.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/s4/recurrent.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

size_t S4RecurrentLanes() { return hn::Lanes(hn::ScalableTag<double>()); }

// Channels [c0, c0 + lanes) of sequence q. Parameters per mode n at [n][lane] (padding lanes zero: their state
// stays zero and is never stored).
void S4RecurrentTask(const S4Problem& p, int64_t q, int64_t c0) {
  const hn::ScalableTag<double> d;
  const size_t L = hn::Lanes(d);
  const S4Discrete& s = p.ssm;
  const int64_t H = s.H, N = s.N, width = std::min<int64_t>(int64_t(L), H - c0);
  static thread_local AlignedBuffer<double> buf;
  static thread_local AlignedBuffer<float> row;
  buf.resize(size_t(8 * N + 2) * L), row.resize(L);
  double *ar = buf.data(), *ai = ar + N * L, *br = ai + N * L, *bi = br + N * L, *cr = bi + N * L,
         *ci = cr + N * L, *hr = ci + N * L, *hi = hr + N * L, *skip = hi + N * L, *uv = skip + L;
  std::fill(buf.data(), buf.data() + (8 * N + 2) * int64_t(L), 0.0);
  for (int64_t lane = 0; lane < width; ++lane) {
    const int64_t c = c0 + lane;
    for (int64_t n = 0; n < N; ++n) {
      const size_t i = s.at(c, n), o = size_t(n) * L + size_t(lane);
      ar[o] = s.dA[i].real(), ai[o] = s.dA[i].imag(), br[o] = s.dB[i].real(), bi[o] = s.dB[i].imag();
      cr[o] = 2.0 * s.C[i].real(), ci[o] = 2.0 * s.C[i].imag();  // the output's 2 Re folded into C
      if (p.h0) {
        const int64_t st = 2 * ((q * H + c) * N + n);
        hr[o] = p.h0[st], hi[o] = p.h0[st + 1];
      }
    }
    if (!s.skip.empty()) skip[lane] = s.skip[size_t(c)];
  }
  const size_t esize = dtype_size(p.u_dtype), osize = dtype_size(p.out_dtype);
  for (int64_t t = 0; t < p.seqs.length[size_t(q)]; ++t) {
    const int64_t at = (p.seqs.begin[size_t(q)] + t) * H + c0;
    convert_to_f32(static_cast<const char*>(p.u) + at * int64_t(esize), p.u_dtype, row.data(), size_t(width));
    for (int64_t lane = 0; lane < width; ++lane) uv[lane] = row[size_t(lane)];
    const auto u = hn::Load(d, uv);
    auto y = hn::Mul(hn::Load(d, skip), u);
    for (int64_t n = 0; n < N; ++n) {
      const size_t o = size_t(n) * L;
      const auto hr0 = hn::Load(d, hr + o), hi0 = hn::Load(d, hi + o);
      const auto a_r = hn::Load(d, ar + o), a_i = hn::Load(d, ai + o);
      const auto h_r = hn::MulAdd(a_r, hr0, hn::NegMulAdd(a_i, hi0, hn::Mul(hn::Load(d, br + o), u)));
      const auto h_i = hn::MulAdd(a_r, hi0, hn::MulAdd(a_i, hr0, hn::Mul(hn::Load(d, bi + o), u)));
      hn::Store(h_r, d, hr + o);
      hn::Store(h_i, d, hi + o);
      y = hn::MulAdd(hn::Load(d, cr + o), h_r, hn::NegMulAdd(hn::Load(d, ci + o), h_i, y));
    }
    hn::Store(y, d, uv);
    for (int64_t lane = 0; lane < width; ++lane) row[size_t(lane)] = float(uv[lane]);
    convert_from_f32(row.data(), static_cast<char*>(p.out) + at * int64_t(osize), p.out_dtype, size_t(width));
  }
  if (!p.ht) return;
  for (int64_t lane = 0; lane < width; ++lane)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t st = 2 * ((q * H + c0 + lane) * N + n);
      p.ht[st] = float(hr[size_t(n) * L + size_t(lane)]);
      p.ht[st + 1] = float(hi[size_t(n) * L + size_t(lane)]);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(S4RecurrentLanes);
HWY_EXPORT(S4RecurrentTask);

namespace {
void run_recurrent(const S4Problem& p) {
  active_target();
  const int64_t lanes = int64_t(HWY_DYNAMIC_DISPATCH(S4RecurrentLanes)());
  const int64_t blocks = (p.ssm.H + lanes - 1) / lanes;
  ThreadPool::global().parallel_for(p.seqs.count() * blocks, [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(S4RecurrentTask)(p, task / blocks, (task % blocks) * lanes);
  });
}
}  // namespace

void s4_recurrent(const S4Args& args) { run_recurrent(make_s4_problem(args)); }

void s4_step(const S4StepArgs& args) { run_recurrent(make_s4_step_problem(args)); }

}  // namespace attnzoo
#endif
