#pragma once
// The value scans a device problem owes (the host cannot read its tensors): NaN / Inf, and positive log decays
// where a tensor holds them, found on the device with the host scans' words. Shared by the linear families'
// CUDA entries; no CUDA headers here.
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace attnzoo {

struct DeviceValueScan {
  const void* data;  // device memory of `n` elements of `dtype` (f32, bf16 or f16)
  DType dtype;
  int64_t n;
  bool log_decay;    // also refuse values > 0
  const char* name;  // the argument the error names
};

// One grid-stride kernel per tensor keeps its smallest offending flat index, then one small copy back: the host
// waits for it, so a checked call is a synchronising call. ArgumentError naming the first tensor in `scans` with
// an offending element, and that element: "contains NaN or Inf (flat index i)" or "log decays must be <= 0,
// found x at flat index i".
void require_finite_on_device(const std::vector<DeviceValueScan>& scans, Stream stream);

}  // namespace attnzoo
