#include "models/model_device.h"

#include "core/error.h"

namespace attnzoo {

bool model_runs_on(Device device) { return device.is_cpu() || (device.is_cuda() && cuda_built()); }

Device resolve_model_device(const std::string& text, const char* argument) {
  if (text != "auto") return parse_device(text, argument);
  return Device::cpu();
}

void require_model_device(Device device, const char* argument) {
  if (device.is_cpu()) return;
  require(model_runs_on(device), argument, [&] {
    return device.str() + " asked, but this build has no CUDA (" + cuda_unavailable_reason() + ")";
  });
  const int present = cuda_device_count();
  require(device.index < present, argument, [&] {
    return present == 0 ? device.str() + " asked, but no GPU is usable here (" + cuda_unavailable_reason() + ")"
                        : device.str() + " asked, but this machine has " + std::to_string(present) + " GPU(s)";
  });
}

}  // namespace attnzoo
