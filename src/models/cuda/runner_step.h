#pragma once
// What both GPU runners (decoder_cuda_runner.cc, rwkv7_cuda_runner.cc) do around their own layers: the notices
// after a load, the start of a step (the device current, its stream, the batch padded to its graph bucket), the
// growth of the step's buffers, the gather of the logits rows and the view of the requested ones.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/device.h"
#include "core/tensor.h"
#include "layers/batch.h"
#include "models/cuda/decoder_cuda_plan.h"
#include "models/cuda/device_linear.h"

namespace attnzoo {

// The lines on stderr about what going to `device` cost the weights (f32 rounded to bf16, GGUF formats expanded,
// the shared dequantization panel): after a runner's load, once.
void print_load_notices(const WeightRounding& rounded, const DequantPanel& panel, Device device);

// A step's start: the runner's device current (restored when the step goes), the stream everything is enqueued
// on, and the batch to run: a decode step replayed from graphs is padded to its batch-size bucket so that nearby
// sizes share a graph (DecodePadding), the pads' logits rows after the requested ones.
struct RunnerStep {
  RunnerStep(Device device, DecodePadding& padding, const Batch& requested, std::span<const int64_t> requested_rows,
             bool graphs);
  const DeviceGuard guard;
  const Stream stream;
  std::span<const int64_t> rows;  // the logits rows computed: the requested ones first
  const Batch& batch;
  const int64_t wanted;  // how many were requested

  // The requested rows' logits out of the f32 [rows, vocab] the head wrote (an empty view for none): the same
  // buffer whether the step was replayed or launched, nothing copied to the host.
  TensorView logits(Device device, void* data, int64_t vocab) const;
};

// A step's buffer, sized from its token count: grown when a bigger step comes, never shrunk.
void grow(DeviceBuffer& buffer, Device device, size_t bytes);

// dst's row i = src's row rows[i] (rows of `row_bytes`), by runs of consecutive rows: one copy for a prompt's
// last rows, one per sequence in a decode step. On `stream`, device to device.
void gather_rows(const DeviceBuffer& src, DeviceBuffer& dst, std::span<const int64_t> rows, size_t row_bytes,
                 Device device, Stream stream);

}  // namespace attnzoo
