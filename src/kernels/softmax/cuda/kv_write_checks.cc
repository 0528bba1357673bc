// The CUDA KV write's host side that needs no CUDA: every refusal before a launch, testable without a GPU.
#include <string>

#include "core/error.h"
#include "kernels/softmax/cuda/kv_write_cuda.h"
#include "kernels/softmax/kv_write_shape.h"

namespace attnzoo {
namespace {

void require_on_device(const TensorView& t, const char* name, const Device* device) {
  require(t.device.is_cuda(), name,
          [&] { return "lives on " + t.device.str() + "; the CUDA KV write needs device memory"; });
  if (device)
    require(t.device == *device, name,
            [&] { return "lives on " + t.device.str() + ", the other operands on " + device->str(); });
}

}  // namespace

void check_paged_rows_cuda(const PagedRowsCuda& w) {
  require_on_device(w.rows, w.rows_name, nullptr);
  require_on_device(w.cache, w.cache_name, &w.rows.device);
  if (w.scale.data != nullptr) require_on_device(w.scale, w.scale_name, &w.rows.device);
  check_paged_rows_shape(w.rows, w.cache, w.rows_name, w.cache_name, w.scale, w.scale_name);
}

}  // namespace attnzoo
