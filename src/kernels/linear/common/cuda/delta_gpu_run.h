#pragma once
// A delta-family case (delta_testing.h) through a public entry on the host and on the GPU, for the GPU tests of
// both delta kernels (delta_recurrent_cuda_test.cc, delta_chunk_cuda_test.cc). g++ only, no CUDA headers.
#include "core/device.h"
#include "kernels/linear/common/delta_problem.h"
#include "kernels/linear/common/delta_testing.h"
#include "testing/device_test_util.h"
#include "testing/test_util.h"

namespace attnzoo::testing {

// A run's output o [B, T, HV, V] and final states s [N, HV, K, V].
struct DeltaOutputs {
  HostTensor o, s;
};

// `entry` (a reference, or a CPU path) on the host inputs of case `c`, f32 outputs.
template <class Entry>
DeltaOutputs delta_host_outputs(const DeltaCase& c, const DeltaInputs& in, Entry&& entry) {
  DeltaOutputs out{HostTensor(DType::f32, {c.B, c.T, c.HV, c.V}, 0, 0.f),
                   HostTensor(DType::f32, {in.N, c.HV, c.K, c.V}, 0, 0.f)};
  entry(in.args(c, out.o, &out.s));
  return out;
}

// `entry` on GPU copies of `in`: o in c.out_dtype, the final state in place over the initial one when `in_place`,
// otherwise in a separate buffer. Both start as NaN bytes, so an element the kernels forget fails.
template <class Entry>
DeltaOutputs delta_gpu_outputs(const DeltaCase& c, const DeltaInputs& in, bool in_place, Entry&& entry) {
  DeltaOutputs out{HostTensor(c.out_dtype, {c.B, c.T, c.HV, c.V}, 0, 0.f),
                   HostTensor(DType::f32, {in.N, c.HV, c.K, c.V}, 0, 0.f)};
  fill_nan_bytes(out.o);
  fill_nan_bytes(out.s);
  const OnDevice q(in.q), k(in.k), v(in.v), g(in.g), beta(in.beta), init(in.init), od(out.o), sd(out.s);
  DeltaArgs a = in.args(c, out.o, &out.s);
  a.q = q.view, a.k = k.view, a.v = v.view, a.beta = beta.view, a.o = od.view;
  if (c.gate != DeltaGate::none) a.g = g.view;
  if (c.initial_state) a.initial_state = init.view;
  a.final_state = in_place ? init.view : sd.view;
  entry(a);
  synchronize(current_stream());
  od.download(out.o);
  (in_place ? init : sd).download(out.s);
  return out;
}

}  // namespace attnzoo::testing
