#pragma once
// An RWKV-7 case (rwkv7_testing.h) through a public entry on the GPU, for the GPU tests of both device kernels
// (rwkv7_recurrent_cuda_test.cc, rwkv7_chunk_cuda_test.cc). g++ only, no CUDA headers.
#include <utility>

#include "core/device.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "kernels/linear/rwkv7/rwkv7_testing.h"
#include "testing/device_test_util.h"
#include "testing/gpu_run_outputs.h"
#include "testing/test_util.h"

namespace attnzoo::testing {

// `entry` (recurrent_rwkv7, or chunk_rwkv7 at a chunk size) on GPU copies of `in`: o in c.out_dtype, the final
// state in place over the initial one when `in_place` (and the case has one), otherwise in a separate buffer
// (gpu_run_outputs.h).
template <class Entry>
Rwkv7Outputs rwkv7_gpu_outputs(const Rwkv7Case& c, const Rwkv7Inputs& in, bool in_place, Entry&& entry) {
  GpuRunOutputs run(c.out_dtype, {c.B, c.T, c.H, c.V}, {c.nseq(), c.H, c.K, c.V});
  const OnDevice r(in.r), w(in.w), k(in.k), v(in.v), ad(in.a), bd(in.b), h0(in.h0);
  Rwkv7Args a = in.args(c);
  a.r = r.view, a.w = w.view, a.k = k.view, a.v = v.view, a.a = ad.view, a.b = bd.view, a.o = run.od.view;
  a.initial_state = c.initial_state ? h0.view : TensorView{};
  const bool same = in_place && c.initial_state;
  a.final_state = run.final_state(h0, same);
  entry(a);
  run.download(h0, same);
  return {std::move(run.o), std::move(run.s)};
}

}  // namespace attnzoo::testing
