#pragma once
// A Mamba-2 case's operands in emulated device memory, for the cases of both Mamba-2 kernels (ssm_cases.cc: the
// recurrence, mamba2_chunk_cases.cc: the chunked SSD): the inputs' copies, the run's outputs (run_outputs.h) and
// the args that point at them.
#include "kernels/linear/mamba2/cuda/mamba2_cuda_testing.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/run_outputs.h"

namespace attnzoo::cuda_emulation {

struct Mamba2Operands : RunOutputs {
  DeviceTensor x, dt, A, B, C, D, z, bias;
  Mamba2Args args;

  Mamba2Operands(const testing::Mamba2DeviceCase& c, const testing::Mamba2DeviceInputs& in, bool in_place)
      : RunOutputs(c.out_dtype, {c.B, c.T, c.H, c.P}, {c.nseq(), c.H, c.P, c.N}, in.h0, c.with_h0, in_place),
        x(on_device(in.x)), dt(on_device(in.dt)), A(on_device(in.A)), B(on_device(in.B)), C(on_device(in.C)),
        D(on_device(in.D)), z(on_device(in.z)), bias(on_device(in.bias)), args(in.args(c)) {
    args.x = x.device_view(), args.dt = dt.device_view(), args.A = A.device_view(), args.B = B.device_view();
    args.C = C.device_view(), args.y = od.device_view();
    if (c.with_D) args.D = D.device_view();
    if (c.with_z) args.z = z.device_view();
    if (c.with_bias) args.dt_bias = bias.device_view();
    if (c.with_h0) args.initial_state = init.device_view();
    args.final_state = final_state();
  }
};

}  // namespace attnzoo::cuda_emulation
