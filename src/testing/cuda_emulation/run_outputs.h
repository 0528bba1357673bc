#pragma once
// The output and final state of a recurrent or chunked kernel's emulated run: host tensors the results come back
// to, device copies that start as NaN bytes (so an element a kernel forgets fails), and the initial state's copy,
// which takes the final state when the run is in place (the engine's decode step and prefill into its cache).
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/tensor.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/test_util.h"

namespace attnzoo::cuda_emulation {

struct RunOutputs {
  testing::HostTensor o, s;  // where download() brings the output and the final state back
  DeviceTensor od, sd, init;

  // o in `o_dtype`, f32 states; without `has_initial` the initial state's copy is NaN bytes too (never read).
  RunOutputs(DType o_dtype, const std::vector<int64_t>& o_shape, const std::vector<int64_t>& s_shape,
             const testing::HostTensor& initial, bool has_initial, bool in_place_)
      : o(o_dtype, o_shape, 0, 0.f), s(DType::f32, s_shape, 0, 0.f), od(on_device(o)), sd(on_device(s)),
        init(on_device(initial)), in_place(in_place_) {
    std::memset(od.device.data(), 0xff, od.device.size());
    std::memset(sd.device.data(), 0xff, sd.device.size());
    if (!has_initial) std::memset(init.device.data(), 0xff, init.device.size());
  }
  RunOutputs(const RunOutputs&) = delete;

  TensorView final_state() const { return in_place ? init.device_view() : sd.device_view(); }
  void download() {
    cuda_emulation::download(od, o);
    cuda_emulation::download(in_place ? init : sd, s);
  }

 private:
  bool in_place;
};

}  // namespace attnzoo::cuda_emulation
