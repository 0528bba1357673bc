#pragma once
// A Mamba-2 case (mamba2_cuda_testing.h) through a public entry on the GPU, for the GPU tests of both device scans
// (mamba2_recurrent_cuda_test.cc, mamba2_chunk_cuda_test.cc). g++ only, no CUDA headers.
#include <utility>

#include "core/device.h"
#include "kernels/linear/mamba2/cuda/mamba2_cuda_testing.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "testing/device_test_util.h"
#include "testing/gpu_run_outputs.h"
#include "testing/test_util.h"

namespace attnzoo::testing {

// `entry` (mamba2_recurrent or mamba2_chunk_scan) on GPU copies of `in`: y in c.out_dtype, the final state in place
// over the initial one when `in_place` (and the case has one), otherwise in a separate buffer (gpu_run_outputs.h).
template <class Entry>
Mamba2Outputs mamba2_gpu_outputs(const Mamba2DeviceCase& c, const Mamba2DeviceInputs& in, bool in_place,
                                 Entry&& entry) {
  GpuRunOutputs run(c.out_dtype, {c.B, c.T, c.H, c.P}, {c.nseq(), c.H, c.P, c.N});
  const OnDevice x(in.x), dt(in.dt), A(in.A), B(in.B), C(in.C), D(in.D), z(in.z), bias(in.bias), h0(in.h0);
  Mamba2Args a = in.args(c);
  a.x = x.view, a.dt = dt.view, a.A = A.view, a.B = B.view, a.C = C.view, a.y = run.od.view;
  if (c.with_D) a.D = D.view;
  if (c.with_z) a.z = z.view;
  if (c.with_bias) a.dt_bias = bias.view;
  if (c.with_h0) a.initial_state = h0.view;
  const bool same = in_place && c.with_h0;
  a.final_state = run.final_state(h0, same);
  entry(a);
  run.download(h0, same);
  return {std::move(run.o), std::move(run.s)};
}

}  // namespace attnzoo::testing
