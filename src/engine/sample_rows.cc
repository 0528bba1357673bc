#include "engine/sample_rows.h"

#include <string>

#include "core/device_unreachable.h"
#include "core/error.h"

#if ATTNZOO_WITH_CUDA
#include "engine/cuda/sample_cuda.h"
#endif

namespace attnzoo {
namespace {

// Both forms: unless `indexed`, sampler i reads row i and a refused row throws.
void sample(const TensorView& logits, bool indexed, std::span<const int64_t> logit_rows,
            std::span<Sampler* const> samplers, std::span<const std::span<const int32_t>> contexts,
            std::span<int32_t> out, std::span<std::string> errors) {
  require(logits.dtype == DType::f32, "logits", "must be float32");
  require(logits.ndim == 2, "logits", "must be [rows, vocab], got " + logits.shape_str());
  require(logits.shape[1] == 1 || logits.stride(1) == 1, "logits", "rows must be contiguous");
  const int64_t rows = logits.shape[0];
  const int64_t n = indexed ? int64_t(logit_rows.size()) : rows;
  const char* per = indexed ? " logit_rows" : " rows";
  require(int64_t(samplers.size()) == n, "samplers",
          "needs one per row: " + std::to_string(samplers.size()) + " for " + std::to_string(n) + per);
  require(int64_t(contexts.size()) == n, "contexts",
          "needs one per row: " + std::to_string(contexts.size()) + " for " + std::to_string(n) + per);
  require(int64_t(out.size()) == n, "out", "needs one entry per row");
  for (size_t i = 0; i < logit_rows.size(); ++i)
    require(logit_rows[i] >= 0 && logit_rows[i] < rows, "logit_rows",
            "entry " + std::to_string(i) + " is " + std::to_string(logit_rows[i]) + ", outside the logits' " +
                std::to_string(rows) + " rows");
  if (logits.device.is_cuda()) {
#if ATTNZOO_WITH_CUDA
    sample_rows_cuda(logits, logit_rows, samplers, contexts, out, errors, current_stream());
    return;
#else
    throw device_unreachable("logits", logits.device);
#endif
  }
  const int64_t vocab = logits.shape[1];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = indexed ? logit_rows[size_t(i)] : i;
    const std::span<const float> row(logits.ptr<const float>() + r * logits.stride(0), size_t(vocab));
    try {
      out[size_t(i)] = samplers[size_t(i)]->sample(row, contexts[size_t(i)]);
      if (indexed) errors[size_t(i)].clear();
    } catch (const ArgumentError& e) {
      if (!indexed) throw ArgumentError(std::string(e.what()) + " (row " + std::to_string(i) + ")");
      out[size_t(i)] = -1;
      errors[size_t(i)] = e.what();
    }
  }
}

}  // namespace

void sample_rows(const TensorView& logits, std::span<Sampler* const> samplers,
                 std::span<const std::span<const int32_t>> contexts, std::span<int32_t> out) {
  sample(logits, /*indexed=*/false, {}, samplers, contexts, out, {});
}

void sample_rows(const TensorView& logits, std::span<const int64_t> logit_rows, std::span<Sampler* const> samplers,
                 std::span<const std::span<const int32_t>> contexts, std::span<int32_t> out,
                 std::span<std::string> errors) {
  require(logit_rows.size() == samplers.size(), "logit_rows",
          "needs one per sampler: " + std::to_string(logit_rows.size()) + " for " + std::to_string(samplers.size()));
  require(errors.size() == samplers.size(), "errors", "needs one entry per sampler");
  sample(logits, /*indexed=*/true, logit_rows, samplers, contexts, out, errors);
}

}  // namespace attnzoo
