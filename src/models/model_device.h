#pragma once
// Where a model runs, as the front ends name it (`--device`, Python's device=): "cpu", "cuda", "cuda:N" or
// "auto". The CPU runs every architecture; a GPU runs the dense decoders the CUDA runner covers
// (models/cuda/decoder_cuda_runner.h: the Llama family), the others refused by name at load
// (Model::make_device_runner). "auto" stays the CPU until the GPU runner has been verified on hardware: it has
// run only under the CUDA emulator's kernel tests so far (docs/benchmarks/cuda.md), and a default should not
// move there on trust.
#include <string>

#include "core/device.h"

namespace attnzoo {

// True when a model's layers can compute on `device` in this build (the CPU; a GPU when the library was built
// with CUDA), before asking which architectures.
bool model_runs_on(Device device);

// "auto": the CPU (see above). Otherwise parse_device's names; an ArgumentError naming `argument` for anything
// else.
Device resolve_model_device(const std::string& text, const char* argument);

// The ArgumentError, naming `argument`, for a device no model can run on here: a GPU in a build without CUDA, or
// one the machine does not have. Host-only and before the weights load, so the refusal costs no wait.
void require_model_device(Device device, const char* argument);

}  // namespace attnzoo
