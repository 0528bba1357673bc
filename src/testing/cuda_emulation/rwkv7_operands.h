#pragma once
// An RWKV-7 case's operands in emulated device memory, for the cases of both RWKV-7 kernels (rwkv7_cases.cc: the
// recurrence, rwkv7_chunk_cases.cc: the chunked form): the inputs' copies, the run's outputs (run_outputs.h) and
// the args that point at them.
#include "kernels/linear/rwkv7/rwkv7.h"
#include "kernels/linear/rwkv7/rwkv7_testing.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/run_outputs.h"

namespace attnzoo::cuda_emulation {

struct Rwkv7Operands : RunOutputs {
  DeviceTensor r, w, k, v, a, b;
  Rwkv7Args args;

  Rwkv7Operands(const testing::Rwkv7Case& c, const testing::Rwkv7Inputs& in, bool in_place)
      : RunOutputs(c.out_dtype, {c.B, c.T, c.H, c.V}, {c.nseq(), c.H, c.K, c.V}, in.h0, c.initial_state, in_place),
        r(on_device(in.r)), w(on_device(in.w)), k(on_device(in.k)), v(on_device(in.v)), a(on_device(in.a)),
        b(on_device(in.b)), args(in.args(c)) {
    args.r = r.device_view(), args.w = w.device_view(), args.k = k.device_view(), args.v = v.device_view();
    args.a = a.device_view(), args.b = b.device_view(), args.o = od.device_view();
    if (c.initial_state) args.initial_state = init.device_view();
    args.final_state = final_state();
  }
};

}  // namespace attnzoo::cuda_emulation
