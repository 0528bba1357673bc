#pragma once
// A delta-family case's operands in emulated device memory, for the cases of both delta kernels (delta_cases.cc:
// the recurrence, delta_chunk_cases.cc: the chunked form): the inputs' copies, the run's outputs (run_outputs.h)
// and the args that point at them.
#include "kernels/linear/common/delta_problem.h"
#include "kernels/linear/common/delta_testing.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/run_outputs.h"

namespace attnzoo::cuda_emulation {

struct DeltaOperands : RunOutputs {
  DeviceTensor q, k, v, g, beta;
  DeltaArgs args;

  DeltaOperands(const testing::DeltaCase& c, const testing::DeltaInputs& in, bool in_place)
      : RunOutputs(c.out_dtype, {c.B, c.T, c.HV, c.V}, {in.N, c.HV, c.K, c.V}, in.init, c.initial_state, in_place),
        q(on_device(in.q)), k(on_device(in.k)), v(on_device(in.v)), g(on_device(in.g)), beta(on_device(in.beta)),
        args(in.args(c, o, &s)) {
    args.q = q.device_view(), args.k = k.device_view(), args.v = v.device_view(), args.beta = beta.device_view();
    args.o = od.device_view();
    if (c.gate != DeltaGate::none) args.g = g.device_view();
    if (c.initial_state) args.initial_state = init.device_view();
    args.final_state = final_state();
    args.check_values = false;  // the host scan would read the device copies (delta_cases.cc tests the device one)
  }
};

}  // namespace attnzoo::cuda_emulation
