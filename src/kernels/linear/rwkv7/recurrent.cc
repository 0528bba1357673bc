// RWKV-7 token by token, vectorized over the value dimension. One task = (sequence, head); the state [K, Vp]
// (V padded to whole vectors) stays in scratch, or is the final-state tensor itself when V needs no padding,
// so a decode step streams the state once. Per token: sa = a^T S (one pass), then S = diag(e^w) S + b sa^T +
// k v^T and o = S^T r in a second pass.
#include <algorithm>
#include <cmath>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/linear/rwkv7/problem.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/rwkv7/recurrent.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace {
struct Scratch {
  AlignedBuffer<float> S, r, w, k, a, b, v, sa, o;
};
const char* at(const void* base, DType t, int64_t index) {
  return static_cast<const char*>(base) + index * int64_t(dtype_size(t));
}
}  // namespace

void Rwkv7RecurrentTask(const Rwkv7Problem& p, int64_t task) {
  static thread_local Scratch sc;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const int64_t s = task / p.H, h = task % p.H;
  const size_t K = size_t(p.K), V = size_t(p.V), Vp = (V + L - 1) / L * L;
  sc.S.resize(K * Vp), sc.r.resize(K), sc.w.resize(K), sc.k.resize(K), sc.a.resize(K), sc.b.resize(K);
  sc.v.resize(Vp), sc.sa.resize(Vp), sc.o.resize(Vp);
  const int64_t base = (s * p.H + h) * p.K * p.V;
  // Work in the final-state tensor directly when rows need no padding (the decode case: no copies).
  const bool in_place = p.ht && Vp == V;
  float* S = in_place ? p.ht + base : sc.S.data();
  if (!p.h0) {
    std::fill(S, S + K * Vp, 0.f);
  } else if (!(in_place && p.h0 == p.ht)) {
    for (size_t i = 0; i < K; ++i) {
      std::copy(p.h0 + base + int64_t(i * V), p.h0 + base + int64_t((i + 1) * V), S + i * Vp);
      std::fill(S + i * Vp + V, S + (i + 1) * Vp, 0.f);
    }
  }
  std::fill(sc.v.data() + V, sc.v.data() + Vp, 0.f);
  for (int64_t t = 0; t < p.seqs.length[size_t(s)]; ++t) {
    const int64_t row = p.seqs.begin[size_t(s)] + t, kb = (row * p.H + h) * p.K, vb = (row * p.H + h) * p.V;
    convert_to_f32(at(p.r, p.r_dtype, kb), p.r_dtype, sc.r.data(), K);
    convert_to_f32(at(p.w, p.w_dtype, kb), p.w_dtype, sc.w.data(), K);
    convert_to_f32(at(p.k, p.k_dtype, kb), p.k_dtype, sc.k.data(), K);
    convert_to_f32(at(p.a, p.a_dtype, kb), p.a_dtype, sc.a.data(), K);
    convert_to_f32(at(p.b, p.b_dtype, kb), p.b_dtype, sc.b.data(), K);
    convert_to_f32(at(p.v, p.v_dtype, vb), p.v_dtype, sc.v.data(), V);
    for (size_t i = 0; i < K; ++i) sc.w[i] = std::exp(sc.w[i]), sc.r[i] *= p.scale;
    for (size_t j = 0; j < Vp; j += L) {
      auto acc = hn::Zero(d);
      for (size_t i = 0; i < K; ++i) acc = hn::MulAdd(hn::Set(d, sc.a[i]), hn::LoadU(d, S + i * Vp + j), acc);
      hn::Store(acc, d, sc.sa.data() + j);
    }
    std::fill(sc.o.data(), sc.o.data() + Vp, 0.f);
    for (size_t i = 0; i < K; ++i) {
      const auto ew = hn::Set(d, sc.w[i]), bi = hn::Set(d, sc.b[i]), ki = hn::Set(d, sc.k[i]), ri = hn::Set(d, sc.r[i]);
      float* Si = S + i * Vp;
      for (size_t j = 0; j < Vp; j += L) {
        auto x = hn::Mul(ew, hn::LoadU(d, Si + j));  // S may be the caller's (unaligned) tensor
        x = hn::MulAdd(bi, hn::Load(d, sc.sa.data() + j), x);
        x = hn::MulAdd(ki, hn::Load(d, sc.v.data() + j), x);
        hn::StoreU(x, d, Si + j);
        hn::Store(hn::MulAdd(ri, x, hn::Load(d, sc.o.data() + j)), d, sc.o.data() + j);
      }
    }
    convert_from_f32(sc.o.data(), static_cast<char*>(p.o) + vb * int64_t(dtype_size(p.o_dtype)), p.o_dtype, V);
  }
  if (p.ht && !in_place)
    for (size_t i = 0; i < K; ++i) std::copy(S + i * Vp, S + i * Vp + V, p.ht + base + int64_t(i * V));
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(Rwkv7RecurrentTask);

void recurrent_rwkv7(const Rwkv7Args& args) {
  const Rwkv7Problem p = make_rwkv7_problem(args);
  if (!p.device.is_cpu()) return rwkv7_recurrent_on_device(p);  // the one branch to a GPU
  active_target();
  ThreadPool::global().parallel_for(p.seqs.count() * p.H, [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(Rwkv7RecurrentTask)(p, task);
  });
}

}  // namespace attnzoo
#endif
