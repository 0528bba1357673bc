// The paged KV write's branch to a GPU: the CUDA build and the CPU-only one differ in this file alone. The entry
// keeps the CPU's contract, a bad slot refused by name before anything is written, so it scans the slots on the
// device and synchronises; a model step that trusts its slot_mapping calls write_paged_rows_cuda unchecked.
#include "kernels/softmax/kv_write_device.h"

#include "core/device_unreachable.h"
#include "core/error.h"

namespace attnzoo {

void write_paged_rows_on_device(std::span<const PagedRowsCuda> writes, const int64_t* slot_mapping) {
  for (const PagedRowsCuda& w : writes) check_paged_rows_cuda(w);
  for (const PagedRowsCuda& w : writes)
    require(w.cache.device == writes[0].cache.device, w.cache_name, [&] {
      return "lives on " + w.cache.device.str() + ", " + writes[0].cache_name + " on " + writes[0].cache.device.str();
    });
  require(slot_mapping != nullptr || writes[0].rows.shape[0] == 0, "slot_mapping", "is required");
#if ATTNZOO_WITH_CUDA
  const DeviceGuard on(writes[0].cache.device);  // the launcher runs on the current device
  write_paged_rows_cuda(writes, slot_mapping, /*check_slots=*/true, current_stream());
#else
  throw device_unreachable(writes[0].cache_name, writes[0].cache.device);
#endif
}

}  // namespace attnzoo
