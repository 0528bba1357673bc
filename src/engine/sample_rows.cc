#include "engine/sample_rows.h"

#include <string>

#include "core/device_unreachable.h"
#include "core/error.h"

#if ATTNZOO_WITH_CUDA
#include "engine/cuda/sample_cuda.h"
#endif

namespace attnzoo {

void sample_rows(const TensorView& logits, std::span<Sampler* const> samplers,
                 std::span<const std::span<const int32_t>> contexts, std::span<int32_t> out) {
  require(logits.dtype == DType::f32, "logits", "must be float32");
  require(logits.ndim == 2, "logits", "must be [rows, vocab], got " + logits.shape_str());
  require(logits.shape[1] == 1 || logits.stride(1) == 1, "logits", "rows must be contiguous");
  const int64_t rows = logits.shape[0];
  require(int64_t(samplers.size()) == rows, "samplers",
          "needs one per row: " + std::to_string(samplers.size()) + " for " + std::to_string(rows) + " rows");
  require(int64_t(contexts.size()) == rows, "contexts",
          "needs one per row: " + std::to_string(contexts.size()) + " for " + std::to_string(rows) + " rows");
  require(int64_t(out.size()) == rows, "out", "needs one entry per row");
  if (logits.device.is_cuda()) {
#if ATTNZOO_WITH_CUDA
    sample_rows_cuda(logits, samplers, contexts, out, current_stream());
    return;
#else
    throw device_unreachable("logits", logits.device);
#endif
  }
  const int64_t vocab = logits.shape[1];
  for (int64_t r = 0; r < rows; ++r) {
    const std::span<const float> row(logits.ptr<const float>() + r * logits.stride(0), size_t(vocab));
    try {
      out[size_t(r)] = samplers[size_t(r)]->sample(row, contexts[size_t(r)]);
    } catch (const ArgumentError& e) {
      throw ArgumentError(std::string(e.what()) + " (row " + std::to_string(r) + ")");
    }
  }
}

}  // namespace attnzoo
