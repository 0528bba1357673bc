#pragma once
// What an entry throws for tensors on a device it cannot reach (no CUDA in this build, or no GPU): the argument,
// the device and why ("q: lives on cuda:0, and attnzoo was built without CUDA ..."). For the entries' one
// branch to a GPU (kernels/softmax/entry.cc, the linear families' *_device.cc).
#include "core/device.h"
#include "core/error.h"

namespace attnzoo {

DeviceError device_unreachable(const char* argument, Device device);

}  // namespace attnzoo
