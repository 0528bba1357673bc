#include "models/cuda/runner_step.h"

#include <algorithm>
#include <cstdio>

#include "models/cuda/device_step.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
void print_load_notices(const WeightRounding& rounded, const DequantPanel& panel, Device device) {
  if (rounded.tensors > 0)
    std::fprintf(stderr,
                 "attnzoo: %lld f32 weight tensors rounded to bf16 on %s (%.1f MiB there instead of %.1f; 8 "
                 "significant bits instead of 24: logits agree with the CPU's f32 run to bf16 tolerance)\n",
                 static_cast<long long>(rounded.tensors), device.str().c_str(),
                 double(rounded.f32_bytes) / 2 / (1 << 20), double(rounded.f32_bytes) / (1 << 20));
  std::fputs(expansion_notice(rounded, device.str()).c_str(), stderr);
  std::fputs(panel_notice(panel.buffer.bytes(), device.str()).c_str(), stderr);
}

RunnerStep::RunnerStep(Device device, DecodePadding& padding, const Batch& requested,
                       std::span<const int64_t> requested_rows, bool graphs)
    : guard(device),
      stream(current_stream()),
      rows(requested_rows),
      batch(padding.step(requested, rows, graphs)),
      wanted(int64_t(requested_rows.size())) {}

void RunnerStep::launch(StepGraphs& graphs, bool replayable, const std::function<std::vector<uint64_t>()>& signature,
                        const std::function<void(Stream)>& launches) const {
  if (replayable && graphs.enabled()) {
    graphs.run(signature(), launches, stream);
  } else {
    launches(stream);
  }
}

std::vector<uint64_t> step_signature_start(int64_t tokens, std::span<const int64_t> rows,
                                           std::initializer_list<const DeviceBuffer*> buffers,
                                           uint64_t workspace_generation) {
  std::vector<uint64_t> sig = {uint64_t(tokens), uint64_t(rows.size())};
  sig.insert(sig.end(), rows.begin(), rows.end());
  for (const DeviceBuffer* b : buffers) sig.push_back(uint64_t(reinterpret_cast<uintptr_t>(b->data())));
  sig.push_back(workspace_generation);
  return sig;
}

TensorView RunnerStep::logits(Device device, void* data, int64_t vocab) const {
  if (wanted == 0) return {};
  return device_view(device, data, DType::f32, {wanted, vocab});
}

void grow(DeviceBuffer& buffer, Device device, size_t bytes) {
  // Never empty: a step of no rows still hands out an address.
  if (buffer.bytes() < bytes) buffer = DeviceBuffer(device, std::max<size_t>(bytes, 4));
}

void gather_rows(const DeviceBuffer& src, DeviceBuffer& dst, std::span<const int64_t> rows, size_t row_bytes,
                 Device device, Stream stream) {
  const size_t R = rows.size();
  for (size_t i = 0; i < R;) {
    size_t n = 1;
    while (i + n < R && rows[i + n] == rows[i] + int64_t(n)) ++n;
    copy_bytes(dst.as<uint8_t>() + i * row_bytes, device, src.as<uint8_t>() + size_t(rows[i]) * row_bytes, device,
               n * row_bytes, stream);
    i += n;
  }
}
#endif

}  // namespace attnzoo
