#include "models/model_device.h"

#include "core/error.h"

namespace attnzoo {

bool model_runs_on(Device device) { return device.is_cpu(); }

Device resolve_model_device(const std::string& text, const char* argument) {
  if (text != "auto") return parse_device(text, argument);
  const Device gpu = Device::cuda(0);
  return model_runs_on(gpu) && cuda_device_count() > 0 ? gpu : Device::cpu();
}

void require_model_device(Device device, const char* argument) {
  require(model_runs_on(device), argument,
          "models run on the CPU so far (" + device.str() +
              " asked); the CUDA kernels run through their entry points (attnzoo.attention, bench kernels "
              "--device cuda)");
}

}  // namespace attnzoo
