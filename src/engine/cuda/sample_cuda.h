#pragma once
// The GPU sampler's launcher (sample.cu, CUDA builds only): engine/sample_rows.cc's branch for device logits.
#include <cstdint>
#include <span>
#include <string>

#include "core/device.h"
#include "core/tensor.h"
#include "engine/sampler.h"

namespace attnzoo {

// As sample_rows, for logits checked there and living on a GPU: one upload of the rows' settings and penalties,
// one kernel on `stream` (a CTA per sampler), and the ids (with each row's status) copied back, which waits for
// the stream. logit_rows empty: sampler i reads row i; errors empty: a refused row throws its error, else it is
// reported there (out[i] = -1).
void sample_rows_cuda(const TensorView& logits, std::span<const int64_t> logit_rows, std::span<Sampler* const> samplers,
                      std::span<const std::span<const int32_t>> contexts, std::span<int32_t> out,
                      std::span<std::string> errors, Stream stream);

}  // namespace attnzoo
