#pragma once
// write_kv_paged's and write_paged_rows' one branch to a GPU (kv_write_device.cc), taken when a tensor lives off
// the CPU, after the device-neutral checks of k against v.
#include <cstdint>
#include <span>

#include "kernels/softmax/cuda/kv_write_cuda.h"

namespace attnzoo {

// Checks every write (check_paged_rows_cuda) and the slots, then scatters on the caches' device; a build without
// CUDA throws the DeviceError naming the first cache.
void write_paged_rows_on_device(std::span<const PagedRowsCuda> writes, const int64_t* slot_mapping);

}  // namespace attnzoo
