#pragma once
// What both GPU runners (decoder_cuda_runner.cc, rwkv7_cuda_runner.cc) do around their own layers: the notices
// after a load, the start of a step (the device current, its stream, the batch padded to its graph bucket), the
// choice between replaying the step from its graphs and launching it, the start of its graph signature, the growth
// of the step's buffers, the gather of the logits rows and the view of the requested ones.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "layers/batch.h"
#include "models/cuda/decoder_cuda_plan.h"
#include "models/cuda/device_linear.h"
#include "models/cuda/step_graphs.h"

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

  // The step's launches on `stream`: through `graphs` (replayed, or captured the second time their signature comes)
  // when `replayable` (a decode step whose launches upload nothing and bake in only what `signature` lists) and
  // graphs are on, the signature built only then; launched as they are otherwise.
  void launch(StepGraphs& graphs, bool replayable, const std::function<std::vector<uint64_t>()>& signature,
              const std::function<void(Stream)>& launches) const;

  // The requested rows' logits out of the f32 [rows, vocab] the head wrote (an empty view for none): the same
  // buffer whether the step was replayed or launched, nothing copied to the host.
  TensorView logits(Device device, void* data, int64_t vocab) const;
};

// The start of a step's graph signature, what every runner's launches bake in: the token count, the logits rows,
// the addresses of the runner's step buffers and the generation of its workspace (whose slots' addresses it
// stands for). The runner appends its own (attention plans, pool addresses).
std::vector<uint64_t> step_signature_start(int64_t tokens, std::span<const int64_t> rows,
                                           std::initializer_list<const DeviceBuffer*> buffers,
                                           uint64_t workspace_generation);

// A step's buffer, sized from its token count: grown when a bigger step comes, never shrunk.
void grow(DeviceBuffer& buffer, Device device, size_t bytes);

// dst's row i = src's row rows[i] (rows of `row_bytes`), by runs of consecutive rows: one copy for a prompt's
// last rows, one per sequence in a decode step. On `stream`, device to device.
void gather_rows(const DeviceBuffer& src, DeviceBuffer& dst, std::span<const int64_t> rows, size_t row_bytes,
                 Device device, Stream stream);

}  // namespace attnzoo
