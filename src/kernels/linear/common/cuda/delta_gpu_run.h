#pragma once
// A delta-family case (delta_testing.h) through a public entry on the host and on the GPU, for the GPU tests of
// both delta kernels (delta_recurrent_cuda_test.cc, delta_chunk_cuda_test.cc). g++ only, no CUDA headers.
#include <utility>

#include "core/device.h"
#include "kernels/linear/common/delta_problem.h"
#include "kernels/linear/common/delta_testing.h"
#include "testing/device_test_util.h"
#include "testing/gpu_run_outputs.h"
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
// otherwise in a separate buffer (gpu_run_outputs.h).
template <class Entry>
DeltaOutputs delta_gpu_outputs(const DeltaCase& c, const DeltaInputs& in, bool in_place, Entry&& entry) {
  GpuRunOutputs run(c.out_dtype, {c.B, c.T, c.HV, c.V}, {in.N, c.HV, c.K, c.V});
  const OnDevice q(in.q), k(in.k), v(in.v), g(in.g), beta(in.beta), init(in.init);
  DeltaArgs a = in.args(c, run.o, &run.s);
  a.q = q.view, a.k = k.view, a.v = v.view, a.beta = beta.view, a.o = run.od.view;
  if (c.gate != DeltaGate::none) a.g = g.view;
  if (c.initial_state) a.initial_state = init.view;
  a.final_state = run.final_state(init, in_place);
  entry(a);
  run.download(init, in_place);
  return {std::move(run.o), std::move(run.s)};
}

}  // namespace attnzoo::testing
