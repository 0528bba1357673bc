#pragma once
// The output and final state of a linear family's kernel run through a public entry on the GPU, for the families'
// GPU runs (delta_gpu_run.h, mamba2_gpu_run.h, rwkv7_gpu_run.h; the emulator's twin is run_outputs.h): host
// tensors the results come back to and their GPU copies, both NaN bytes first so an element the kernels forget
// fails; the final state over the initial state's copy when the run is in place (the engine's decode step and
// prefill into its cache), otherwise in a buffer of its own. g++ only, no CUDA headers.
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "testing/device_test_util.h"
#include "testing/test_util.h"

namespace attnzoo::testing {

struct GpuRunOutputs {
  HostTensor o, s;
  OnDevice od, sd;

  // o in `o_dtype`, f32 states.
  GpuRunOutputs(DType o_dtype, const std::vector<int64_t>& o_shape, const std::vector<int64_t>& s_shape)
      : o(o_dtype, o_shape, 0, 0.f), s(DType::f32, s_shape, 0, 0.f), od(nan_bytes(o)), sd(nan_bytes(s)) {}
  GpuRunOutputs(const GpuRunOutputs&) = delete;

  // Where the entry writes the final state: `init` (the initial state's GPU copy) when `in_place`.
  TensorView final_state(const OnDevice& init, bool in_place) const { return in_place ? init.view : sd.view; }
  // After the entry (and a final_state() of the same `init`, `in_place`): the results back in o and s.
  void download(const OnDevice& init, bool in_place) {
    synchronize(current_stream());
    od.download(o);
    (in_place ? init : sd).download(s);
  }

 private:
  static const HostTensor& nan_bytes(HostTensor& t) {
    fill_nan_bytes(t);
    return t;
  }
};

}  // namespace attnzoo::testing
