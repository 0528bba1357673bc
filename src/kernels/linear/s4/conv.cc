// The convolution form of S4D / DSS. One task = one block of 2V channels (V = float lanes): their kernel rows
// (Vandermonde), then every sequence: y = K * u directly (short sequences) or through FFTs. Two channels share
// one complex transform, channel c in the real parts and channel c + V in the imaginary parts, lanes holding
// V such pairs: the input [B, T, H] already stores each time step's channels side by side, so a time step of
// the block is two vector loads. Both signals are real, so their spectra separate from the joint one
// (X_a[k] = (Z[k] + conj Z[-k]) / 2, X_b[k] = (Z[k] - conj Z[-k]) / 2i): a real FFT's halving of the work
// without a real FFT. The kernel's spectrum is taken once per transform size and reused by every sequence.
#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/linear/s4/fft.h"
#include "kernels/linear/s4/problem.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/s4/conv.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/linear/s4/fft-inl.h"
#include "kernels/linear/s4/vandermonde-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace {

struct ConvScratch {
  AlignedBuffer<float> kt;           // kernel rows transposed: [l][2V]
  AlignedBuffer<float> qr, qi;       // the kernel pair's spectrum [n][V]
  AlignedBuffer<float> zr, zi;       // the input pair's spectrum, then the output [n][V]
  AlignedBuffer<float> ut, yt;       // a sequence's inputs and outputs [t][2V]
  AlignedBuffer<float> row, anchor;  // the block's channels as rows [lane][l]; Vandermonde scratch
  std::vector<cdouble> weights, a, sums;
  PowerTable table;
};

// W = X_a K_a + i X_b K_b at the pair of frequencies (k, -k) held at positions p, q of the bit-reversed
// spectra, scaled by 1 / n for the unscaled inverse. With z1 = Z[k], z2 = Z[-k]: X_a = (z1 + conj z2) / 2 and
// X_b = (z1 - conj z2) / 2i; likewise K_a, K_b from the kernel pair's spectrum (the 1/2s go into one scale).
HWY_INLINE void PairProduct(float* zr, float* zi, const float* qr, const float* qi, size_t p, size_t q, float scale) {
  const hn::ScalableTag<float> d;
  const auto h = hn::Set(d, 0.25f * scale);
  const auto split = [&](Cx a, Cx b) {  // (2 X_a, 2 X_b) of a = Z[k], b = Z[-k]
    return std::pair<Cx, Cx>{{hn::Add(a.r, b.r), hn::Sub(a.i, b.i)}, {hn::Add(a.i, b.i), hn::Sub(b.r, a.r)}};
  };
  const auto [xa, xb] = split(LoadCx(zr, zi, p), LoadCx(zr, zi, q));
  const auto [ka, kb] = split(LoadCx(qr, qi, p), LoadCx(qr, qi, q));
  const Cx P = Mul(xa, ka), R = Mul(xb, kb);
  const Cx Ps{hn::Mul(h, P.r), hn::Mul(h, P.i)}, Rs{hn::Mul(h, R.r), hn::Mul(h, R.i)};
  StoreCx({hn::Sub(Ps.r, Rs.i), hn::Add(Ps.i, Rs.r)}, zr, zi, p);  // W[k] = P + i R
  StoreCx({hn::Add(Ps.r, Rs.i), hn::Sub(Rs.r, Ps.i)}, zr, zi, q);  // W[-k] = conj P + i conj R
}

// The pair transform of [rows][2V] data: real parts from lanes [0, V), imaginary from [V, 2V); zero beyond.
void LoadPair(const float* src, int64_t rows, size_t n, float* re, float* im) {
  const hn::ScalableTag<float> d;
  const size_t V = hn::Lanes(d);
  for (size_t t = 0; t < n; ++t) {
    const bool in = int64_t(t) < rows;
    hn::Store(in ? hn::Load(d, src + t * 2 * V) : hn::Zero(d), d, re + t * V);
    hn::Store(in ? hn::Load(d, src + t * 2 * V + V) : hn::Zero(d), d, im + t * V);
  }
}

// y[t] = sum_{j <= t} K[j] u[t - j], both [t][2V].
void DirectConv(const float* kt, const float* ut, int64_t len, float* yt) {
  const hn::ScalableTag<float> d;
  const size_t V = hn::Lanes(d);
  for (int64_t t = 0; t < len; ++t) {
    auto lo = hn::Zero(d), hi = hn::Zero(d);
    for (int64_t j = 0; j <= t; ++j) {
      const float* k = kt + size_t(j) * 2 * V;
      const float* u = ut + size_t(t - j) * 2 * V;
      lo = hn::MulAdd(hn::Load(d, k), hn::Load(d, u), lo);
      hi = hn::MulAdd(hn::Load(d, k + V), hn::Load(d, u + V), hi);
    }
    hn::Store(lo, d, yt + size_t(t) * 2 * V);
    hn::Store(hi, d, yt + size_t(t) * 2 * V + V);
  }
}

}  // namespace

size_t S4ConvBlockWidth() { return 2 * hn::Lanes(hn::ScalableTag<float>()); }

namespace {
// Between one channel per row (rows[lane * len + t]) and the block's time-major layout (cols[t * W + lane]), in
// 64-step tiles: a lane at a time over the whole length would stride through the block's buffer once per lane.
void RowsToColumns(const float* rows, int64_t len, int64_t width, size_t W, float* cols, bool add) {
  for (int64_t t0 = 0; t0 < len; t0 += 64)
    for (int64_t lane = 0; lane < width; ++lane)
      for (int64_t t = t0; t < std::min(len, t0 + 64); ++t) {
        float& c = cols[size_t(t) * W + size_t(lane)];
        c = add ? c + rows[lane * len + t] : rows[lane * len + t];
      }
}
void ColumnsToRows(const float* cols, int64_t len, int64_t width, size_t W, float* rows) {
  for (int64_t t0 = 0; t0 < len; t0 += 64)
    for (int64_t lane = 0; lane < width; ++lane)
      for (int64_t t = t0; t < std::min(len, t0 + 64); ++t) rows[lane * len + t] = cols[size_t(t) * W + size_t(lane)];
}
}  // namespace

// Channels [c0, c0 + 2V); `order` lists the sequences by transform size, so each size's kernel spectrum is
// computed once.
void S4ConvTask(const S4Problem& p, const std::vector<int64_t>& order, int64_t c0) {
  const hn::ScalableTag<float> d;
  const size_t V = hn::Lanes(d), W = 2 * V;
  const S4Discrete& s = p.ssm;
  const int64_t H = s.H, N = s.N, width = std::min<int64_t>(int64_t(W), H - c0), kmax = p.max_length();
  static thread_local ConvScratch sc;
  sc.kt.resize(size_t(kmax) * W), sc.row.resize(size_t(kmax) * W + kVandTile), sc.anchor.resize(size_t(2 * N));
  sc.ut.resize(size_t(kmax) * W), sc.yt.resize(size_t(kmax) * W);
  std::fill(sc.kt.data(), sc.kt.data() + kmax * int64_t(W), 0.f);
  sc.weights.resize(size_t(N)), sc.sums.resize(size_t(N));
  HWY_ALIGN float skip[2 * HWY_MAX_BYTES / sizeof(float)] = {};
  for (int64_t lane = 0; lane < width; ++lane) {
    const int64_t c = c0 + lane;
    if (!s.skip.empty()) skip[lane] = s.skip[size_t(c)];
    sc.table.build(&s.log_dA[s.at(c, 0)], N);
    for (int64_t n = 0; n < N; ++n) sc.weights[size_t(n)] = s.C[s.at(c, n)] * s.dB[s.at(c, n)];
    VandermondeRow(sc.table, sc.weights.data(), N, kmax, sc.row.data() + lane * kmax, sc.a, sc.anchor.data());
  }
  RowsToColumns(sc.row.data(), kmax, width, W, sc.kt.data(), false);
  size_t spectrum = 0;  // the transform size the kernel spectrum in qr / qi is for
  const size_t isize = dtype_size(p.u_dtype), osize = dtype_size(p.out_dtype);
  for (int64_t q : order) {
    const int64_t len = p.seqs.length[size_t(q)], begin = p.seqs.begin[size_t(q)];
    for (int64_t t = 0; t < len; ++t) {
      float* dst = sc.ut.data() + size_t(t) * W;
      convert_to_f32(static_cast<const char*>(p.u) + ((begin + t) * H + c0) * int64_t(isize), p.u_dtype, dst,
                     size_t(width));
      std::fill(dst + width, dst + W, 0.f);
    }
    if (len <= s4_direct_max) {
      DirectConv(sc.kt.data(), sc.ut.data(), len, sc.yt.data());
    } else {
      const size_t n = s4fft::size_for(len);
      const float* tw = s4fft::twiddles(n);
      sc.zr.resize(n * V), sc.zi.resize(n * V);
      if (spectrum != n) {  // kernel rows past n / 2 would wrap into the first len outputs; none are needed
        sc.qr.resize(n * V), sc.qi.resize(n * V);
        LoadPair(sc.kt.data(), std::min<int64_t>(kmax, int64_t(n / 2)), n, sc.qr.data(), sc.qi.data());
        FftForward(sc.qr.data(), sc.qi.data(), n, tw, n);
        spectrum = n;
      }
      LoadPair(sc.ut.data(), len, n, sc.zr.data(), sc.zi.data());
      FftForward(sc.zr.data(), sc.zi.data(), n, tw, n);
      int bits = 0;
      while ((size_t(1) << bits) < n) ++bits;
      for (size_t pos = 0; pos < n; ++pos) {
        const size_t k = s4fft::bit_reverse(pos, bits), partner = s4fft::bit_reverse((n - k) & (n - 1), bits);
        if (partner >= pos) PairProduct(sc.zr.data(), sc.zi.data(), sc.qr.data(), sc.qi.data(), pos, partner, 1.f / float(n));
      }
      FftInverse(sc.zr.data(), sc.zi.data(), n, tw, n);
      for (int64_t t = 0; t < len; ++t) {
        hn::Store(hn::Load(d, sc.zr.data() + size_t(t) * V), d, sc.yt.data() + size_t(t) * W);
        hn::Store(hn::Load(d, sc.zi.data() + size_t(t) * V), d, sc.yt.data() + size_t(t) * W + V);
      }
    }
    for (int64_t t = 0; t < len; ++t)
      for (size_t v = 0; v < W; v += V) {
        float* y = sc.yt.data() + size_t(t) * W + v;
        hn::Store(hn::MulAdd(hn::Load(d, skip + v), hn::Load(d, sc.ut.data() + size_t(t) * W + v), hn::Load(d, y)), d, y);
      }
    if (p.h0) {  // y_t += 2 Re(sum_n C dA^(t+1) h0): a Vandermonde row with weights C dA h0
      for (int64_t lane = 0; lane < width; ++lane) {
        const int64_t c = c0 + lane, state = (q * H + c) * N;
        sc.table.build(&s.log_dA[s.at(c, 0)], N);
        for (int64_t n = 0; n < N; ++n)
          sc.weights[size_t(n)] =
              s.C[s.at(c, n)] * s.dA[s.at(c, n)] * cdouble(p.h0[2 * (state + n)], p.h0[2 * (state + n) + 1]);
        VandermondeRow(sc.table, sc.weights.data(), N, len, sc.row.data() + lane * len, sc.a, sc.anchor.data());
      }
      RowsToColumns(sc.row.data(), len, width, W, sc.yt.data(), true);
    }
    if (p.ht) {  // h_T = dA^T h0 + dB sum_j u_j dA^(T-1-j)
      ColumnsToRows(sc.ut.data(), len, width, W, sc.row.data());
      std::vector<float> rev(size_t(len) + kVandTile);
      for (int64_t lane = 0; lane < width; ++lane) {
        const int64_t c = c0 + lane, state = (q * H + c) * N;
        sc.table.build(&s.log_dA[s.at(c, 0)], N);
        VandermondeTranspose(sc.table, sc.row.data() + lane * len, N, len, sc.sums.data(), rev.data());
        for (int64_t n = 0; n < N; ++n) {
          const size_t i = s.at(c, n);
          cdouble h = s.dB[i] * sc.sums[size_t(n)];
          if (p.h0) h += std::exp(double(len) * s.log_dA[i]) * cdouble(p.h0[2 * (state + n)], p.h0[2 * (state + n) + 1]);
          p.ht[2 * (state + n)] = float(h.real()), p.ht[2 * (state + n) + 1] = float(h.imag());
        }
      }
    }
    for (int64_t t = 0; t < len; ++t)
      convert_from_f32(sc.yt.data() + size_t(t) * W, static_cast<char*>(p.out) + ((begin + t) * H + c0) * int64_t(osize),
                       p.out_dtype, size_t(width));
  }
}

// K[c, l] for channels [c0, c0 + 2V).
void S4KernelTask(const S4Discrete& s, int64_t L, float* K, int64_t c0) {
  static thread_local ConvScratch sc;
  sc.anchor.resize(size_t(2 * s.N)), sc.weights.resize(size_t(s.N));
  for (int64_t c = c0; c < std::min<int64_t>(s.H, c0 + int64_t(S4ConvBlockWidth())); ++c) {
    sc.table.build(&s.log_dA[s.at(c, 0)], s.N);
    for (int64_t n = 0; n < s.N; ++n) sc.weights[size_t(n)] = s.C[s.at(c, n)] * s.dB[s.at(c, n)];
    VandermondeRow(sc.table, sc.weights.data(), s.N, L, K + c * L, sc.a, sc.anchor.data());
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(S4ConvBlockWidth);
HWY_EXPORT(S4ConvTask);
HWY_EXPORT(S4KernelTask);

void s4_conv(const S4Args& args) {
  const S4Problem p = make_s4_problem(args);
  active_target();
  // Sequences by transform size (the direct ones first), so a block computes each size's kernel spectrum once.
  std::vector<int64_t> order(size_t(p.seqs.count()));
  std::iota(order.begin(), order.end(), 0);
  const auto size_of = [&](int64_t q) {
    const int64_t len = p.seqs.length[size_t(q)];
    return len <= s4_direct_max ? size_t(0) : s4fft::size_for(len);
  };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return size_of(a) < size_of(b); });
  const int64_t width = int64_t(HWY_DYNAMIC_DISPATCH(S4ConvBlockWidth)());
  const int64_t blocks = (p.ssm.H + width - 1) / width;
  ThreadPool::global().parallel_for(blocks, [&](int64_t block, int) {
    HWY_DYNAMIC_DISPATCH(S4ConvTask)(p, order, block * width);
  });
}

void s4_kernel(const S4Params& params, const TensorView& K) {
  const S4Discrete s = make_s4_discrete(params);
  const int64_t L = check_s4_kernel_out(s, K);
  active_target();
  const int64_t width = int64_t(HWY_DYNAMIC_DISPATCH(S4ConvBlockWidth)());
  ThreadPool::global().parallel_for((s.H + width - 1) / width, [&](int64_t block, int) {
    HWY_DYNAMIC_DISPATCH(S4KernelTask)(s, L, K.ptr<float>(), block * width);
  });
}

}  // namespace attnzoo
#endif
