#pragma once
// The GPU sampler's launcher (sample.cu, CUDA builds only): engine/sample_rows.cc's branch for device logits.
#include <cstdint>
#include <span>

#include "core/device.h"
#include "core/tensor.h"
#include "engine/sampler.h"

namespace attnzoo {

// As sample_rows, for logits checked there and living on a GPU: one upload of the rows' settings and penalties,
// one kernel on `stream`, and the ids (with each row's status) copied back, which waits for the stream.
void sample_rows_cuda(const TensorView& logits, std::span<Sampler* const> samplers,
                      std::span<const std::span<const int32_t>> contexts, std::span<int32_t> out, Stream stream);

}  // namespace attnzoo
