// The selective scan, vectorized over channels. One task = (sequence, block of 16 channels of one group): inputs
// are transposed a time tile at a time from the channel-major layout into [time, channel] rows, then each vector
// of channels runs the tile with its state in registers (N = 16, every Mamba-1 model; other N from scratch).
// A step costs, per state index n, one exp2 (A is stored pre-scaled by log2(e)), one multiply and two fused
// multiply-adds. Serves the decode step too, as a scan of length 1 updating the state in place.
#include <algorithm>
#include <cmath>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/linear/mamba/problem.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/mamba/recurrent.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "kernels/common/fast_exp2-inl.h"
#include "kernels/linear/common/ssm_rows-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace {
constexpr size_t kBlock = 16;  // channels per task: one AVX-512 vector, two AVX2 vectors
constexpr size_t kTile = 64;   // time steps transposed at once

struct Scratch {
  AlignedBuffer<float> h, a, dt, du, u, z, y, b, c, skip, row;
};

const char* at(const void* base, DType t, int64_t index) {
  return static_cast<const char*>(base) + index * int64_t(dtype_size(t));
}

// A channel's (or B / C row's) run of `n` steps as f32: f32 inputs are read in place, others widened.
const float* StepsF32(const void* base, DType t, int64_t index, float* scratch, size_t n) {
  if (t == DType::f32) return static_cast<const float*>(base) + index;
  convert_to_f32(at(base, t, index), t, scratch, n);
  return scratch;
}

// One time tile for one vector of channels at c0: h [N, kBlock] (state n of channel c at n * kBlock + c), a2
// likewise (A * log2 e), dt / du / y [rows, kBlock], b / c [rows, N]. kN > 0 fixes N at compile time so the
// state lives in registers; kN = 0 reads N at run time and keeps the state in h.
template <size_t kN>
HWY_INLINE void ScanTile(size_t rows, size_t N, size_t c0, float* HWY_RESTRICT h, const float* HWY_RESTRICT a2,
                         const float* HWY_RESTRICT dt, const float* HWY_RESTRICT du, const float* HWY_RESTRICT b,
                         const float* HWY_RESTRICT c, float* HWY_RESTRICT y) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  if constexpr (kN > 0) {
    V hv[kN];
#pragma GCC unroll 32
    for (size_t n = 0; n < kN; ++n) hv[n] = hn::Load(d, h + n * kBlock + c0);
    for (size_t t = 0; t < rows; ++t) {
      const V vdt = hn::Load(d, dt + t * kBlock + c0), vdu = hn::Load(d, du + t * kBlock + c0);
      const float* bt = b + t * kN;
      const float* ct = c + t * kN;
      V acc0 = hn::Zero(d), acc1 = hn::Zero(d);
#pragma GCC unroll 32  // unrolled, the state stays in registers
      for (size_t n = 0; n < kN; ++n) {
        const V decay = FastExp2(d, hn::Mul(vdt, hn::Load(d, a2 + n * kBlock + c0)));
        hv[n] = hn::MulAdd(decay, hv[n], hn::Mul(vdu, hn::Set(d, bt[n])));
        if (n % 2) acc1 = hn::MulAdd(hv[n], hn::Set(d, ct[n]), acc1);
        else acc0 = hn::MulAdd(hv[n], hn::Set(d, ct[n]), acc0);
      }
      hn::Store(hn::Add(acc0, acc1), d, y + t * kBlock + c0);
    }
#pragma GCC unroll 32
    for (size_t n = 0; n < kN; ++n) hn::Store(hv[n], d, h + n * kBlock + c0);
  } else {
    for (size_t t = 0; t < rows; ++t) {
      const V vdt = hn::Load(d, dt + t * kBlock + c0), vdu = hn::Load(d, du + t * kBlock + c0);
      V acc = hn::Zero(d);
      for (size_t n = 0; n < N; ++n) {
        float* hn_ = h + n * kBlock + c0;
        const V decay = FastExp2(d, hn::Mul(vdt, hn::Load(d, a2 + n * kBlock + c0)));
        const V hv = hn::MulAdd(decay, hn::Load(d, hn_), hn::Mul(vdu, hn::Set(d, b[t * N + n])));
        hn::Store(hv, d, hn_);
        acc = hn::MulAdd(hv, hn::Set(d, c[t * N + n]), acc);
      }
      hn::Store(acc, d, y + t * kBlock + c0);
    }
  }
}

// The next tile's channel runs and B / C rows, requested while this tile computes: channels lie L elements
// apart, more streams than the hardware prefetcher follows.
void PrefetchTile(const SelectiveScanProblem& p, int64_t b, int64_t g, int64_t d0, size_t width, int64_t pos,
                  size_t rows) {
  const auto span = [&](const void* base, DType t, int64_t index) {
    if (!base) return;
    const char* q = at(base, t, index);
    for (size_t off = 0; off < rows * dtype_size(t); off += 64) __builtin_prefetch(q + off, 0, 2);
  };
  for (size_t c = 0; c < width; ++c) {
    const int64_t ci = p.channel_index(b, d0 + int64_t(c), pos);
    span(p.u, p.u_dtype, ci);
    span(p.delta, p.delta_dtype, ci);
    span(p.z, p.z_dtype, ci);
  }
  for (int64_t n = 0; n < p.N; ++n) {
    span(p.Bm, p.b_dtype, p.state_index(b, g, n, pos));
    span(p.Cm, p.c_dtype, p.state_index(b, g, n, pos));
  }
}
}  // namespace

void SelectiveScanTask(const SelectiveScanProblem& p, int64_t blocks_per_group, int64_t task) {
  static thread_local Scratch sc;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const int64_t blk = task % blocks_per_group, sg = task / blocks_per_group, g = sg % p.G, s = sg / p.G;
  const int64_t cpg = p.channels_per_group();
  const int64_t d0 = g * cpg + blk * int64_t(kBlock), d1 = std::min(g * cpg + cpg, d0 + int64_t(kBlock));
  const size_t width = size_t(d1 - d0), N = size_t(p.N);
  sc.h.resize(N * kBlock), sc.a.resize(N * kBlock), sc.dt.resize(kTile * kBlock), sc.du.resize(kTile * kBlock);
  sc.u.resize(kTile * kBlock), sc.z.resize(kTile * kBlock), sc.y.resize(kTile * kBlock), sc.b.resize(kTile * N);
  sc.c.resize(kTile * N), sc.skip.resize(kBlock), sc.row.resize(kTile);
  float *h = sc.h.data(), *a = sc.a.data();

  // Padding lanes (a partial block) have A = 0, dt = 0, u = 0: their state stays zero and is never stored.
  std::fill(h, h + N * kBlock, 0.f);
  std::fill(a, a + N * kBlock, 0.f);
  std::fill(sc.skip.data(), sc.skip.data() + kBlock, 0.f);
  for (size_t c = 0; c < width; ++c) {
    const int64_t ch = d0 + int64_t(c);
    for (size_t n = 0; n < N; ++n) {
      a[n * kBlock + c] = p.A[size_t(ch) * N + n] * 1.4426950408889634f;  // exp(dt A) = 2^(dt A log2 e)
      if (p.h0) h[n * kBlock + c] = p.h0[(s * p.D + ch) * p.N + int64_t(n)];
    }
    if (!p.skip.empty()) sc.skip[c] = p.skip[size_t(ch)];
  }
  for (size_t i = 0; i < kTile * kBlock; ++i) sc.u[i] = sc.dt[i] = sc.z[i] = 0.f;

  const int64_t b = p.batch_of(s), len = p.seqs.length[size_t(s)], start = p.seqs.begin[size_t(s)];
  for (int64_t t0 = 0; t0 < len; t0 += int64_t(kTile)) {
    const size_t rows = size_t(std::min<int64_t>(int64_t(kTile), len - t0));
    const int64_t pos = start + t0;
    if (t0 + int64_t(kTile) < len)
      PrefetchTile(p, b, g, d0, width, pos + int64_t(kTile), size_t(std::min<int64_t>(int64_t(kTile), len - t0 - int64_t(kTile))));
    for (size_t c = 0; c < width; ++c) {
      const int64_t ch = d0 + int64_t(c), ci = p.channel_index(b, ch, pos);
      const float* u = StepsF32(p.u, p.u_dtype, ci, sc.row.data(), rows);
      for (size_t t = 0; t < rows; ++t) sc.u[t * kBlock + c] = u[t];
      const float* delta = StepsF32(p.delta, p.delta_dtype, ci, sc.row.data(), rows);
      const float bias = p.bias.empty() ? 0.f : p.bias[size_t(ch)];
      for (size_t t = 0; t < rows; ++t) sc.dt[t * kBlock + c] = delta[t] + bias;
      if (p.z) {
        const float* z = StepsF32(p.z, p.z_dtype, ci, sc.row.data(), rows);
        for (size_t t = 0; t < rows; ++t) sc.z[t * kBlock + c] = z[t];
      }
    }
    if (p.softplus) {  // softplus(x) = log(1 + e^x), and x itself past 20 (as torch), padding lanes included
      const auto threshold = hn::Set(d, 20.f);
      for (size_t i = 0; i < rows * kBlock; i += L) {
        const auto x = hn::Load(d, sc.dt.data() + i);
        hn::Store(hn::IfThenElse(hn::Gt(x, threshold), x, hn::Log1p(d, hn::Exp(d, hn::Min(x, threshold)))), d,
                  sc.dt.data() + i);
      }
      for (size_t t = 0; t < rows; ++t) std::fill(sc.dt.data() + t * kBlock + width, sc.dt.data() + (t + 1) * kBlock, 0.f);
    }
    for (size_t i = 0; i < rows * kBlock; i += L)
      hn::Store(hn::Mul(hn::Load(d, sc.dt.data() + i), hn::Load(d, sc.u.data() + i)), d, sc.du.data() + i);
    for (size_t n = 0; n < N; ++n) {
      const int64_t si = p.state_index(b, g, int64_t(n), pos);
      const float* bn = StepsF32(p.Bm, p.b_dtype, si, sc.row.data(), rows);
      for (size_t t = 0; t < rows; ++t) sc.b[t * N + n] = bn[t];
      const float* cn = StepsF32(p.Cm, p.c_dtype, si, sc.row.data(), rows);
      for (size_t t = 0; t < rows; ++t) sc.c[t * N + n] = cn[t];
    }

    for (size_t c0 = 0; c0 < kBlock; c0 += L) {
      if (N == 16) ScanTile<16>(rows, N, c0, h, a, sc.dt.data(), sc.du.data(), sc.b.data(), sc.c.data(), sc.y.data());
      else ScanTile<0>(rows, N, c0, h, a, sc.dt.data(), sc.du.data(), sc.b.data(), sc.c.data(), sc.y.data());
    }
    for (size_t t = 0; t < rows; ++t)
      SkipAndGate(sc.y.data() + t * kBlock, kBlock, p.skip.empty() ? nullptr : sc.skip.data(),
                  sc.u.data() + t * kBlock, p.z ? sc.z.data() + t * kBlock : nullptr);
    for (size_t c = 0; c < width; ++c) {
      for (size_t t = 0; t < rows; ++t) sc.row[t] = sc.y[t * kBlock + c];
      const int64_t ci = p.channel_index(b, d0 + int64_t(c), pos);
      convert_from_f32(sc.row.data(), static_cast<char*>(p.out) + ci * int64_t(dtype_size(p.out_dtype)), p.out_dtype,
                       rows);
    }
  }
  if (!p.ht) return;
  for (size_t c = 0; c < width; ++c)
    for (size_t n = 0; n < N; ++n) p.ht[(s * p.D + d0 + int64_t(c)) * p.N + int64_t(n)] = h[n * kBlock + c];
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(SelectiveScanTask);

namespace {
// The one branch to a GPU, after the device-neutral validation.
void run_scan(const SelectiveScanProblem& p) {
  if (!p.device.is_cpu()) return selective_scan_on_device(p);
  active_target();
  const int64_t blocks = (p.channels_per_group() + 15) / 16;
  ThreadPool::global().parallel_for(p.seqs.count() * p.G * blocks, [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(SelectiveScanTask)(p, blocks, task);
  });
}
}  // namespace

void selective_scan(const SelectiveScanArgs& args) { run_scan(make_selective_scan_problem(args)); }

void selective_state_update(const SelectiveStateUpdateArgs& args) { run_scan(make_selective_step_problem(args)); }

}  // namespace attnzoo
#endif
