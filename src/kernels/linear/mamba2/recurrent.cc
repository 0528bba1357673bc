// Mamba-2 token by token: O(1) work per token and head. One task = (sequence, head); the state [P, N] stays
// in the task's scratch and each row is updated and read out in one vectorized pass over N. Also serves the
// single-step decode update, where the state is read and written in place.
#include <algorithm>
#include <cmath>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/linear/mamba2/problem.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/mamba2/recurrent.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/linear/common/ssm_rows-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

namespace {
struct Scratch {
  AlignedBuffer<float> state, x, b, c, z, y;
};

const char* at(const void* base, DType t, int64_t index) {
  return static_cast<const char*>(base) + index * int64_t(dtype_size(t));
}
}  // namespace

void Mamba2RecurrentTask(const Mamba2Problem& p, int64_t task) {
  static thread_local Scratch sc;
  const int64_t s = task / p.H, head = task % p.H, g = head / p.heads_per_group();
  const size_t P = size_t(p.P), N = size_t(p.N);
  sc.state.resize(P * N), sc.x.resize(P), sc.b.resize(N), sc.c.resize(N), sc.z.resize(P), sc.y.resize(P);
  const int64_t state_base = (s * p.H + head) * p.P * p.N;
  // The final state doubles as the working state, so a decode step (h0 == ht) streams the state once.
  float* h = p.ht ? p.ht + state_base : sc.state.data();
  if (!p.h0) std::fill(h, h + P * N, 0.f);
  else if (p.h0 != p.ht) std::copy(p.h0 + state_base, p.h0 + state_base + int64_t(P * N), h);
  const float A = p.A[size_t(head)];
  const float* D = p.D.empty() ? nullptr : p.D.data() + head * p.P;
  for (int64_t t = 0; t < p.seqs.length[size_t(s)]; ++t) {
    const int64_t row = p.seqs.begin[size_t(s)] + t;
    const int64_t xi = (row * p.H + head) * p.P, bi = (row * p.G + g) * p.N;
    convert_to_f32(at(p.x, p.x_dtype, xi), p.x_dtype, sc.x.data(), P);
    convert_to_f32(at(p.Bm, p.b_dtype, bi), p.b_dtype, sc.b.data(), N);
    convert_to_f32(at(p.Cm, p.c_dtype, bi), p.c_dtype, sc.c.data(), N);
    if (p.z) convert_to_f32(at(p.z, p.z_dtype, xi), p.z_dtype, sc.z.data(), P);
    const float dt = p.dt[size_t(row * p.H + head)];
    const float decay = std::exp(A * dt);
    for (size_t i = 0; i < P; ++i)
      sc.y[i] = DecayAddDot(h + i * N, N, decay, dt * sc.x[i], sc.b.data(), sc.c.data());
    SkipAndGate(sc.y.data(), P, D, sc.x.data(), p.z ? sc.z.data() : nullptr);
    convert_from_f32(sc.y.data(), static_cast<char*>(p.y) + xi * int64_t(dtype_size(p.y_dtype)), p.y_dtype, P);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(Mamba2RecurrentTask);

namespace {
// The one branch to a GPU, after the device-neutral validation.
void run_recurrent(const Mamba2Problem& p) {
  if (!p.device.is_cpu()) return mamba2_recurrent_on_device(p);
  active_target();
  ThreadPool::global().parallel_for(p.seqs.count() * p.H, [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(Mamba2RecurrentTask)(p, task);
  });
}
}  // namespace

void mamba2_recurrent(const Mamba2Args& args) { run_recurrent(make_mamba2_problem(args)); }

void mamba2_state_update(const Mamba2StepArgs& args) { run_recurrent(make_mamba2_step_problem(args)); }

}  // namespace attnzoo
#endif
