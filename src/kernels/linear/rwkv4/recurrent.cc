// RWKV-4 WKV, channels in vector lanes. One task = (sequence, block of 64 channels); the three state vectors
// stay in scratch and each token costs four exps and one division per channel.
#include <algorithm>
#include <cmath>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/linear/rwkv4/problem.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/rwkv4/recurrent.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace {
constexpr size_t kBlock = 64;
struct Scratch {
  AlignedBuffer<float> a, b, m, w, u, k, v, o;
};
}  // namespace

void Rwkv4Task(const Rwkv4Problem& p, int64_t blocks, int64_t task) {
  static thread_local Scratch sc;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const int64_t s = task / blocks, c0 = (task % blocks) * int64_t(kBlock);
  const size_t width = size_t(std::min<int64_t>(int64_t(kBlock), p.C - c0));
  for (auto* buf : {&sc.a, &sc.b, &sc.m, &sc.w, &sc.u, &sc.k, &sc.v, &sc.o}) buf->resize(kBlock);
  // Padding lanes carry harmless values (k = v = 0, finite state) and are never stored.
  for (size_t c = 0; c < kBlock; ++c) {
    const bool live = c < width;
    const int64_t base = s * 3 * p.C + c0 + int64_t(c);
    sc.a[c] = live && p.h0 ? p.h0[base] : 0.f;
    sc.b[c] = live && p.h0 ? p.h0[base + p.C] : 0.f;
    sc.m[c] = live && p.h0 ? p.h0[base + 2 * p.C] : -1e38f;
    sc.w[c] = live ? p.decay[size_t(c0) + c] : -1.f;
    sc.u[c] = live ? p.bonus[size_t(c0) + c] : 0.f;
    sc.k[c] = sc.v[c] = 0.f;
  }
  for (int64_t i = 0; i < p.seqs.length[size_t(s)]; ++i) {
    const int64_t idx = (p.seqs.begin[size_t(s)] + i) * p.C + c0;
    convert_to_f32(static_cast<const char*>(p.k) + idx * int64_t(dtype_size(p.k_dtype)), p.k_dtype, sc.k.data(), width);
    convert_to_f32(static_cast<const char*>(p.v) + idx * int64_t(dtype_size(p.v_dtype)), p.v_dtype, sc.v.data(), width);
    for (size_t c = 0; c < width; c += L) {
      const auto a = hn::Load(d, sc.a.data() + c), b = hn::Load(d, sc.b.data() + c), m = hn::Load(d, sc.m.data() + c);
      const auto k = hn::Load(d, sc.k.data() + c), v = hn::Load(d, sc.v.data() + c);
      const auto uk = hn::Add(hn::Load(d, sc.u.data() + c), k);
      const auto q = hn::Max(m, uk);
      const auto e1 = hn::Exp(d, hn::Sub(m, q)), e2 = hn::Exp(d, hn::Sub(uk, q));
      hn::Store(hn::Div(hn::MulAdd(e1, a, hn::Mul(e2, v)), hn::MulAdd(e1, b, e2)), d, sc.o.data() + c);
      const auto mw = hn::Add(m, hn::Load(d, sc.w.data() + c));
      const auto m2 = hn::Max(mw, k);
      const auto f1 = hn::Exp(d, hn::Sub(mw, m2)), f2 = hn::Exp(d, hn::Sub(k, m2));
      hn::Store(hn::MulAdd(f1, a, hn::Mul(f2, v)), d, sc.a.data() + c);
      hn::Store(hn::MulAdd(f1, b, f2), d, sc.b.data() + c);
      hn::Store(m2, d, sc.m.data() + c);
    }
    convert_from_f32(sc.o.data(), static_cast<char*>(p.out) + idx * int64_t(dtype_size(p.out_dtype)), p.out_dtype,
                     width);
  }
  if (!p.ht) return;
  for (size_t c = 0; c < width; ++c) {
    const int64_t base = s * 3 * p.C + c0 + int64_t(c);
    p.ht[base] = sc.a[c], p.ht[base + p.C] = sc.b[c], p.ht[base + 2 * p.C] = sc.m[c];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(Rwkv4Task);

void recurrent_rwkv4(const Rwkv4Args& args) {
  const Rwkv4Problem p = make_rwkv4_problem(args);
  active_target();
  const int64_t blocks = (p.C + 63) / 64;
  ThreadPool::global().parallel_for(p.seqs.count() * blocks, [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(Rwkv4Task)(p, blocks, task);
  });
}

}  // namespace attnzoo
#endif
