#pragma once
// A case's inputs in emulated device memory, their views marked as a GPU's (as the runners' are, so the entries
// take pool-addressed states), for the cases that run one family's kernel several times over the same inputs with
// outputs and states of their own: the pool-state decode steps and prefills (pool_state_cases.cc,
// pool_state_chunk_cases.cc, rwkv7_pool_prefill.h) and the rows-per-thread runs (recurrent_rows_cases.cc).
// Each args() points the family's args at these copies and at the output `o`; the states are the caller's.
#include "core/tensor.h"
#include "kernels/linear/common/delta_problem.h"
#include "kernels/linear/common/delta_testing.h"
#include "kernels/linear/common/gla_testing.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "kernels/linear/rwkv7/rwkv7_testing.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/pool_states.h"

namespace attnzoo::cuda_emulation {

struct DeltaGpuInputs {
  DeviceTensor q, k, v, g, beta;
  explicit DeltaGpuInputs(const testing::DeltaInputs& in)
      : q(on_device(in.q)), k(on_device(in.k)), v(on_device(in.v)), g(on_device(in.g)), beta(on_device(in.beta)) {}
  DeltaArgs args(const testing::DeltaCase& c, const testing::DeltaInputs& in, const DeviceTensor& o) const {
    testing::HostTensor unused(DType::f32, {1}, 0, 0.f);
    DeltaArgs x = in.args(c, unused, nullptr);
    x.q = on_gpu(q.device_view()), x.k = on_gpu(k.device_view()), x.v = on_gpu(v.device_view());
    x.beta = on_gpu(beta.device_view()), x.o = on_gpu(o.device_view());
    x.g = c.gate == DeltaGate::none ? TensorView{} : on_gpu(g.device_view());
    x.initial_state = x.final_state = TensorView{};
    x.check_values = false;  // the host scan would read device memory
    return x;
  }
};

struct GlaGpuInputs {
  DeviceTensor q, k, v, g, g_gamma;
  explicit GlaGpuInputs(const testing::GlaInputs& in)
      : q(on_device(in.q)), k(on_device(in.k)), v(on_device(in.v)), g(on_device(in.g)),
        g_gamma(on_device(in.g_gamma)) {}
  // g and g_gamma where the family takes them (GlaInputs::args).
  testing::GlaEntryArgs args(const testing::GlaDeviceCase& c, const testing::GlaInputs& in,
                             const DeviceTensor& o) const {
    testing::HostTensor unused(DType::f32, {1}, 0, 0.f);
    testing::GlaEntryArgs x = in.args(c, unused, nullptr);
    x.q = on_gpu(q.device_view()), x.k = on_gpu(k.device_view()), x.v = on_gpu(v.device_view());
    x.o = on_gpu(o.device_view());
    if (!x.g.empty()) x.g = on_gpu(g.device_view());
    if (!x.g_gamma.empty()) x.g_gamma = on_gpu(g_gamma.device_view());
    x.opts.initial_state = x.opts.final_state = TensorView{};
    x.opts.check_values = false;  // the host scan would read device memory
    return x;
  }
};

struct Rwkv7GpuInputs {
  DeviceTensor r, w, k, v, a, b;
  explicit Rwkv7GpuInputs(const testing::Rwkv7Inputs& in)
      : r(on_device(in.r)), w(on_device(in.w)), k(on_device(in.k)), v(on_device(in.v)), a(on_device(in.a)),
        b(on_device(in.b)) {}
  Rwkv7Args args(const testing::Rwkv7Case& c, const testing::Rwkv7Inputs& in, const DeviceTensor& o) const {
    Rwkv7Args x = in.args(c);
    x.r = on_gpu(r.device_view()), x.w = on_gpu(w.device_view()), x.k = on_gpu(k.device_view());
    x.v = on_gpu(v.device_view()), x.a = on_gpu(a.device_view()), x.b = on_gpu(b.device_view());
    x.o = on_gpu(o.device_view());
    return x;
  }
};

}  // namespace attnzoo::cuda_emulation
